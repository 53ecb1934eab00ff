import pytest
import torch

from tuner.device import (Device, cpu_bf16_native, cpu_bf16_note, cpu_has_bf16, cpu_native_precisions, device_facts,
                          resolve_device)
from tuner.errors import DeviceError
from tests.helpers.fakes import FakeCudaDevice


def test_cuda_asked_for_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="no CUDA GPU; use device: cpu"):
        resolve_device("cuda")
    assert resolve_device("auto").kind == "cpu"


def test_grad_scaler_only_for_fp16():
    dev = FakeCudaDevice()
    assert dev.grad_scaler("fp16").is_enabled()
    assert not dev.grad_scaler("bf16").is_enabled()
    assert not dev.grad_scaler("fp32").is_enabled()


def test_unsupported_precision_is_refused_not_changed(monkeypatch):
    dev = Device("cuda", torch.device("cpu"), "old GPU")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    with pytest.raises(DeviceError, match="precision bf16 is not supported on cuda"):
        dev.check_precision("bf16")


def test_native_precisions_leave_out_what_the_device_only_emulates(monkeypatch):
    """What a space's `native: true` offers: on a CPU fp32, and bf16 where this CPU has native bf16; on CUDA fp16,
    and bf16 only where the GPU computes it natively (is_bf16_supported() alone also says yes where bf16 is
    emulated); TF32 from Ampere on."""
    cpu = Device("cpu", torch.device("cpu")).native_precisions()
    assert cpu == (["fp32", "bf16"] if cpu_has_bf16() else ["fp32"])
    gpu = Device("cuda", torch.device("cuda", 0), "V100")  # torch.cuda is faked below: no GPU is touched
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    assert gpu.native_precisions() == ["fp32", "fp16"]
    assert "bf16" in gpu.supported_precisions()  # it runs (emulated, slowly): a config may still ask for it
    assert device_facts(gpu) == {"device": "cuda (V100)", "precisions": ["fp32", "fp16"], "tf32_available": False}
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert device_facts(gpu) == {"device": "cuda (V100)", "precisions": ["fp32", "fp16", "bf16"],
                                 "tf32_available": True}
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)  # a torch without including_emulation
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert gpu.native_precisions() == ["fp32", "fp16"]


# /proc/cpuinfo flags of real CPUs (abridged): an AMD EPYC (Zen 3) without bf16, a Zen 4 EPYC with AVX512-BF16, a
# Sapphire Rapids Xeon with AMX, and aarch64 `Features` lines of a Graviton2 (no BF16) and a Graviton3 (BF16).
ZEN3 = {"fpu", "sse4_2", "avx", "avx2", "fma", "sha_ni", "vaes"}
ZEN4 = ZEN3 | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}
SAPPHIRE_RAPIDS = ZEN3 | {"avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "amx_int8"}
AMX_ONLY = ZEN3 | {"amx_bf16", "amx_tile"}
SKYLAKE = ZEN3 | {"avx512f", "avx512bw", "avx512vl"}  # AVX512, which torch's capability reports, but no bf16
GRAVITON2 = {"fp", "asimd", "aes", "crc32", "atomics", "asimdhp", "asimddp"}
GRAVITON3 = GRAVITON2 | {"sve", "i8mm", "bf16", "svebf16"}


@pytest.mark.parametrize("flags, machine, native", [
    (ZEN3, "x86_64", False), (ZEN4, "x86_64", True), (SAPPHIRE_RAPIDS, "x86_64", True), (AMX_ONLY, "AMD64", True),
    (SKYLAKE, "x86_64", False), (GRAVITON2, "aarch64", False), (GRAVITON3, "aarch64", True),
    (GRAVITON3, "arm64", True), ({"bf16"}, "x86_64", False), ({"avx512_bf16"}, "aarch64", False),
    (set(), "x86_64", False), ({"bf16"}, "ppc64le", False)])
def test_cpu_bf16_is_native_only_with_the_architectures_own_bf16_feature(flags, machine, native):
    """bf16 is offered on a CPU only where it computes it natively (~20x slower than fp32 emulated on a Zen 3
    EPYC; 1.35x faster than fp32 with AVX512-BF16/AMX on a nanoGPT-style LM); fp16 never (no fast CPU path)."""
    assert cpu_bf16_native(flags, machine) is native
    assert cpu_native_precisions(flags, machine) == (["fp32", "bf16"] if native else ["fp32"])
    note = cpu_bf16_note("AMD EPYC", flags, machine)
    assert (note is None) is native
    if not native:
        assert note.startswith("bf16 is not offered on this CPU (AMD EPYC): ")
        assert "native: true" in note and "\n" not in note
        if machine == "x86_64" and flags:
            assert "no avx512_bf16 or amx_bf16 CPU feature" in note
        if machine == "aarch64":
            assert "no bf16 (FEAT_BF16) CPU feature" in note


def test_this_cpu_is_read_from_its_own_flags():
    """The process's answer is the decision on its own /proc/cpuinfo flags (no flags: none native)."""
    from tuner.device import cpu_flags

    assert cpu_has_bf16() is cpu_bf16_native(cpu_flags())
    assert Device("cpu", torch.device("cpu")).supported_precisions() == ["fp32", "bf16", "fp16"]  # forced: runs


def test_this_cpu_is_read_once_a_process(monkeypatch, request):
    """/proc/cpuinfo is read once: every study, trial and report after the first asks the cached answer."""
    import tuner.device

    reads = []
    monkeypatch.setattr(tuner.device, "cpu_flags", lambda: reads.append(1) or frozenset({"avx512_bf16"}))
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    tuner.device.cpu_has_bf16.cache_clear()
    request.addfinalizer(tuner.device.cpu_has_bf16.cache_clear)
    assert cpu_has_bf16() and cpu_has_bf16() and cpu_native_precisions() == ["fp32", "bf16"]
    assert len(reads) == 1


def test_autocast_casts_matmuls_to_the_asked_dtype():
    dev = Device("cpu", torch.device("cpu"))
    lin = torch.nn.Linear(4, 4)
    with dev.autocast("bf16"):
        assert lin(torch.randn(2, 4)).dtype == torch.bfloat16
    with dev.autocast("fp32"):
        assert lin(torch.randn(2, 4)).dtype == torch.float32


def test_cpu_peak_memory_counts_shared_pages_once(monkeypatch):
    """Forked loader workers share the parent's pages: PSS splits them, summed RSS would count them per worker."""
    import psutil

    from tuner.device import Device

    class Proc:
        def __init__(self, rss, pss, children=()):
            self.rss, self.pss, self._children = rss, pss, list(children)

        def memory_full_info(self):
            return type("Full", (), {"rss": self.rss, "pss": self.pss, "uss": self.pss // 2})()

        def memory_info(self):
            return type("Info", (), {"rss": self.rss})()

        def children(self, recursive=True):
            return self._children

    mb = 2**20
    workers = [Proc(rss=900 * mb, pss=300 * mb) for _ in range(3)]  # 600 MB of each RSS shared with the parent
    monkeypatch.setattr(psutil, "Process", lambda: Proc(rss=1000 * mb, pss=400 * mb, children=workers))
    dev = Device("cpu", torch.device("cpu"))
    dev.reset_peak_memory()
    dev.sample_memory()
    assert dev.peak_memory_mb() == 400 + 3 * 300  # not 1000 + 3 * 900


def test_cpu_memory_is_sampled_at_most_twice_a_second_but_always_for_the_peak(monkeypatch):
    """Reading every process's memory costs 3-4 ms: the probes' short windows must not pay it at each window end,
    yet the peak a trial reports always includes a sample taken when it is asked for."""
    import time

    import psutil

    from tuner.device import MEMORY_SAMPLE_S, Device

    reads, now = [], [100.0]
    mb = 2**20

    class Proc:
        def memory_full_info(self):
            reads.append(now[0])
            return type("Full", (), {"rss": 0, "pss": (100 + len(reads)) * mb, "uss": 0})()

        def children(self, recursive=True):
            return []

    monkeypatch.setattr(psutil, "Process", Proc)
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    dev = Device("cpu", torch.device("cpu"))
    dev.reset_peak_memory()
    for _ in range(50):  # fifty window ends within 0.1 s
        dev.sample_memory()
        now[0] += 0.002
    assert len(reads) == 1
    now[0] += MEMORY_SAMPLE_S
    dev.sample_memory()
    assert len(reads) == 2
    assert dev.peak_memory_mb() == 103 and len(reads) == 3  # asked for the peak: sampled again, at once
    dev.reset_peak_memory()
    dev.sample_memory()  # a new measurement starts with a sample
    assert len(reads) == 4
