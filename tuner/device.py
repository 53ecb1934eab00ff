"""The device a trial runs on, as one object the training loop asks instead of branching on CUDA.

Everything CUDA-specific (synchronize before reading clocks, pin_memory, GradScaler for fp16, peak memory) lives
behind this object, so the logic is exercised on the CPU in tests with a fake that pretends to be CUDA.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from tuner.errors import DeviceError
from tuner.knobs import PRECISION_DTYPES

MEMORY_SAMPLE_S = 0.5  # the least time between two CPU memory samples at window ends (Device.sample_memory)


@dataclass
class Device:
    """A torch device plus the few decisions that depend on its kind."""

    kind: str  # "cpu" or "cuda": what the code paths branch on
    torch_device: torch.device
    name: str = ""
    sync_calls: int = field(default=0, repr=False)
    _cpu_peak_mb: float = field(default=0.0, repr=False)
    _cpu_sampled_at: float | None = field(default=None, repr=False)

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    # --- precision -------------------------------------------------------------------------------------
    def supported_precisions(self) -> list[str]:
        """The precisions that run at all (a config asking for another is refused)."""
        if self.is_cuda:
            out = ["fp32", "fp16"]
            if torch.cuda.is_bf16_supported():
                out.append("bf16")
            return out
        return ["fp32", "bf16", "fp16"]  # torch's CPU autocast runs both (slowly without hardware support)

    def native_precisions(self) -> list[str]:
        """The precisions this device runs natively, i.e. fast: what a space's `native: true` choice offers.

        CUDA: fp32 and fp16 (tensor cores or at least native half arithmetic), bf16 only where the GPU computes it
        natively (Ampere or newer; `is_bf16_supported()` alone also says yes where bf16 is emulated, slowly). CPU:
        fp32, and bf16 where the CPU computes it natively (cpu_has_bf16: AVX512-BF16 / AMX-BF16 on x86, the BF16
        extension on Arm). torch's CPU autocast runs bf16 anywhere, but without those instructions at a fraction of
        fp32's speed (~20x slower on an AMD EPYC without them), and fp16 on a CPU has no fast path worth searching
        (AMX-FP16 aside), so either is searched there only when a space lists it without `native`."""
        if not self.is_cuda:
            return cpu_native_precisions()
        if self.torch_device.type != "cuda":  # a fake CUDA device in tests: an Ampere-class GPU
            return ["fp32", "fp16", "bf16"]
        return ["fp32", "fp16"] + (["bf16"] if cuda_bf16_native(self.torch_device) else [])

    def check_precision(self, precision: str) -> None:
        if precision not in self.supported_precisions():
            raise DeviceError(
                f"precision {precision} is not supported on {self.describe()}; "
                f"use one of {', '.join(self.supported_precisions())}"
            )

    def autocast(self, precision: str) -> contextlib.AbstractContextManager[Any]:
        """Autocast context for the forward pass; fp32 is a no-op so the loop has no precision branches."""
        if precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.torch_device.type, dtype=dtype_of(precision))

    def grad_scaler(self, precision: str) -> torch.amp.GradScaler:
        """GradScaler only for fp16 (bf16 has fp32's exponent range and needs none)."""
        return torch.amp.GradScaler(self.torch_device.type, enabled=precision == "fp16")

    # --- loader ----------------------------------------------------------------------------------------
    def check_compile(self, mode: str) -> None:
        from tuner.knobs import CUDA_COMPILE_MODES

        if mode in CUDA_COMPILE_MODES and not self.is_cuda:
            raise DeviceError(f"compile: {mode} needs a CUDA device (it captures CUDA graphs); on the CPU use "
                              f"default or max-autotune-no-cudagraphs, or off")

    def tf32_available(self) -> bool:
        """TF32 tensor cores: CUDA devices of compute capability 8.0 (Ampere) or newer."""
        if self.torch_device.type != "cuda":
            return self.is_cuda  # a fake CUDA device in tests
        return torch.cuda.get_device_capability(self.torch_device)[0] >= 8

    # --- timing and memory -----------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for queued kernels, so a clock read measures work done, not work launched."""
        self.sync_calls += 1
        if self.torch_device.type == "cuda":
            torch.cuda.synchronize(self.torch_device)

    def reset_peak_memory(self) -> None:
        self._cpu_peak_mb = 0.0
        self._cpu_sampled_at = None
        if self.torch_device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.torch_device)

    def sample_memory(self, force: bool = False) -> None:
        """CPU: note the memory of this process and its DataLoader workers (called at window ends), at most once
        per MEMORY_SAMPLE_S unless `force`: one sample reads /proc for every process (3-4 ms here), and the loader
        probes' short windows called it 200 times (0.7 s of a study's probes) for a peak that a steady loop
        holds from window to window.

        Each process counts its proportional share of shared pages (PSS; USS where PSS is unavailable), so forked
        workers that share the parent's pages are not counted once per worker, as summed RSS would. ru_maxrss would
        be simpler but never resets, so a reused Ray actor would report its lifetime peak."""
        if self.torch_device.type != "cuda":
            import time

            import psutil

            now = time.monotonic()
            if not force and self._cpu_sampled_at is not None and now - self._cpu_sampled_at < MEMORY_SAMPLE_S:
                return
            self._cpu_sampled_at = now
            proc = psutil.Process()
            total = process_memory(proc)
            for child in proc.children(recursive=True):
                total += process_memory(child)
            self._cpu_peak_mb = max(self._cpu_peak_mb, total / 2**20)

    def peak_memory_mb(self) -> float:
        """CUDA: max memory allocated by tensors. CPU: max sampled PSS of the process and its loader workers."""
        if self.torch_device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.torch_device) / 2**20
        self.sample_memory(force=True)
        return self._cpu_peak_mb

    def free_memory(self) -> None:
        if self.torch_device.type == "cuda":
            torch.cuda.empty_cache()

    @contextlib.contextmanager
    def numerics(self, params: Any) -> Iterator[None]:
        """Numeric and kernel-choice settings of the trial's knobs, restored afterwards (a reused process must not
        inherit them).

        CUDA only: TF32 for fp32 matmuls and convolutions is the explicit `tf32` knob (PyTorch's own defaults
        differ between matmul, off, and cuDNN, on); cuDNN's autotuning is the `cudnn_benchmark` knob, set either
        way (a user's script may have left it on). A fake CUDA device in tests sets the same flags (harmless on
        a CPU, where no cuDNN kernel runs)."""
        if not self.is_cuda:
            yield
            return
        tf32 = bool(getattr(params, "tf32", False))
        bench = bool(getattr(params, "cudnn_benchmark", False))
        before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = bench
        try:
            yield
        finally:
            (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark) = before

    def describe(self) -> str:
        return f"{self.kind} ({self.name})" if self.name else self.kind


def dtype_of(precision: str) -> torch.dtype:
    """The torch dtype of a precision knob's value (tuner.knobs.PRECISION_DTYPES names it)."""
    return getattr(torch, PRECISION_DTYPES[precision].removeprefix("torch."))


def cuda_bf16_native(device: torch.device) -> bool:
    """bf16 computed natively (not emulated) on this CUDA device (the current one, as resolve_device picks)."""
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # an older torch without including_emulation: native bf16 came with compute capability 8.0
        return torch.cuda.get_device_capability(device)[0] >= 8


# The CPU features that compute bf16 natively, as Linux's /proc/cpuinfo names them: x86's `flags` (AVX512-BF16's
# dot products, AMX's bf16 tiles), aarch64's `Features` (FEAT_BF16). torch's get_cpu_capability() cannot tell: it
# says AVX512 on CPUs with and without AVX512-BF16 alike (and oneDNN's "bf16 supported" includes emulation).
X86_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
ARM_BF16_FLAGS = ("bf16",)


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags from /proc/cpuinfo (x86 `flags`, Arm `Features`); empty where there is none
    (macOS, Windows: bf16 is then not offered natively, and a space can still list it without `native`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def _cpu_arch(machine: str) -> str:
    machine = machine.lower()
    if machine in ("x86_64", "amd64", "i386", "i686", "x86"):
        return "x86"
    if machine in ("aarch64", "arm64") or machine.startswith("armv8"):
        return "arm"
    return machine


def cpu_bf16_native(flags: Any = None, machine: str | None = None) -> bool:
    """Whether a CPU with these feature `flags` on this `machine` (platform.machine()) computes bf16 natively;
    both default to this process's CPU. The decision alone, so it is tested with planted flag sets."""
    import platform

    flags = cpu_flags() if flags is None else frozenset(flags)
    arch = _cpu_arch(platform.machine() if machine is None else machine)
    wanted = {"x86": X86_BF16_FLAGS, "arm": ARM_BF16_FLAGS}.get(arch, ())
    return any(flag in flags for flag in wanted)


@functools.cache
def cpu_has_bf16() -> bool:
    """Whether this machine's CPU computes bf16 natively (cpu_bf16_native of its own flags, read once a process;
    a test that plants flags calls cpu_has_bf16.cache_clear())."""
    return cpu_bf16_native()


def cpu_native_precisions(flags: Any = None, machine: str | None = None) -> list[str]:
    """What a CPU with these `flags` runs natively (this process's CPU by default): fp32, and bf16 where native."""
    native = cpu_has_bf16() if flags is None and machine is None else cpu_bf16_native(flags, machine)
    return ["fp32", "bf16"] if native else ["fp32"]


def cpu_bf16_note(name: str = "", flags: Any = None, machine: str | None = None) -> str | None:
    """One line saying why a CPU study does not offer bf16 (None where the CPU computes it natively)."""
    import platform

    if cpu_bf16_native(flags, machine):
        return None
    arch = _cpu_arch(platform.machine() if machine is None else machine)
    missing = {"x86": " or ".join(X86_BF16_FLAGS), "arm": "bf16 (FEAT_BF16)"}.get(arch)
    why = f"it has no {missing} CPU feature" if missing else f"native bf16 is not detected on {arch} CPUs"
    return (f"bf16 is not offered on this CPU{f' ({name})' if name else ''}: {why}, so torch emulates bf16 at a "
            f"fraction of fp32's speed; list precision without native: true to search it anyway")


def device_facts(device: Device) -> dict[str, Any]:
    """What a search space may depend on about a trial's device (the sampling context's device keys):
    `device` (a name for messages), `precisions` (native_precisions) and `tf32_available`."""
    return {"device": device.describe(), "precisions": device.native_precisions(),
            "tf32_available": bool(device.tf32_available())}


def cuda_facts() -> dict[str, Any]:
    """device_facts of this process's CUDA device (what the GPU probe of a search runs on a GPU node)."""
    return device_facts(resolve_device("cuda"))


def cuda_available() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def resolve_device(spec: str = "auto") -> Device:
    """auto -> cuda if there is one, else cpu. Asking for cuda without a GPU is a user error."""
    if spec not in ("auto", "cpu", "cuda"):
        raise DeviceError(f"unknown device {spec!r}; use auto, cpu or cuda")
    if spec == "cuda" or (spec == "auto" and cuda_available()):
        if not cuda_available():
            raise DeviceError("device cuda asked for, but this machine has no CUDA GPU; use device: cpu or auto")
        idx = torch.cuda.current_device()
        return Device("cuda", torch.device("cuda", idx), torch.cuda.get_device_name(idx))
    import platform

    return Device("cpu", torch.device("cpu"), platform.processor() or platform.machine())


def device_for(torch_device: torch.device) -> Device:
    """tuner's Device for a torch.device (what a workload's evaluate has in hand: its models' device)."""
    if torch_device.type == "cuda":
        idx = torch_device.index if torch_device.index is not None else torch.cuda.current_device()
        return Device("cuda", torch.device("cuda", idx), torch.cuda.get_device_name(idx))
    return Device(torch_device.type, torch_device)


_OOM_TEXT = ("out of memory", "CUDNN_STATUS_ALLOC_FAILED", "CUBLAS_STATUS_ALLOC_FAILED", "CUDA_ERROR_OUT_OF_MEMORY",
             # torch's CPU allocator (c10/core/impl/alloc_cpu.cpp): "[enforce fail at alloc_cpu.cpp:127] ...
             # DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes" (older: "not enough memory")
             "DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


def is_oom(err: BaseException) -> bool:
    """An out-of-memory, wherever it was raised: torch's OutOfMemoryError, or the RuntimeError cuDNN/cuBLAS raise
    when their workspace cannot be allocated and torch's CPU allocator raises when host memory is exhausted (no
    OutOfMemoryError subclass for those)."""
    if isinstance(err, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(err, RuntimeError) and any(text in str(err) for text in _OOM_TEXT)


def process_memory(proc: Any) -> int:
    """Bytes a process accounts for: PSS (Linux), else USS, else RSS; 0 when it is gone."""
    import psutil

    try:
        full = proc.memory_full_info()
        return int(getattr(full, "pss", None) or getattr(full, "uss", None) or full.rss)
    except psutil.AccessDenied:
        try:
            return int(proc.memory_info().rss)
        except psutil.Error:
            return 0
    except psutil.Error:
        return 0
