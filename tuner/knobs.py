"""Every knob, declared once, in one table: its type, default and domain, what it changes, what it needs, which
ceiling it moves, how PyTorch spells it.

The config's knob fields (tuner.config.Params is built from `KNOBS`), the ceiling cache keys (tuner.train.ceilings)
and of_peak's (tuner.measure.flops), the knobs the study's probes decide and their order (tuner.search._loader_probe),
the plain-PyTorch settings of an export (tuner.report.settings), the refusal of CUDA-only knobs on a CPU and the
README's knob table are all derived from `KNOBS`, so a new knob is one entry here plus the code that applies it,
and a knob one list forgot can no longer share a cached ceiling with a config it differs from.

Roles: `learned` changes what the model learns (so its quality is scored), `numerics` changes only how its
arithmetic rounds (the algorithm is the same: a parity test against fp32 and a change of seed says whether that
shows, tuner.parity), `speed` changes only how fast it trains (so probes of a ceiling can decide it instead
of training trials), `run` names the run rather than tuning it.
No torch import here: the CLI reads this table.
Over 400 lines because the one table is the point: each knob's entry, its plain-PyTorch spelling and the readers of
the table stay together, so a new knob is one place to look.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

CUDA_COMPILE_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes with CUDA graphs: refused on a CPU

Role = Literal["learned", "numerics", "speed", "run"]
Ceiling = Literal["compute", "input"]
Need = Literal["cuda", "ampere", "workers"]
CEILINGS: tuple[Ceiling, ...] = ("compute", "input")
Count = Literal["flops", "peak"]  # of_peak's two cached figures: FLOPs per sample, the device's matmul peak

NEEDS_TEXT = {"cuda": "CUDA only", "ampere": "CUDA, Ampere or newer", "workers": "num_workers > 0"}
# The one precision -> dtype map, as torch spells the dtype (no torch here: tuner.device.dtype_of makes the dtype;
# export and the knob lines print the name).
PRECISION_DTYPES = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16"}

# The knobs' value types (tuner.config.Params' fields are built from the table below with them).
Precision = Literal[tuple(PRECISION_DTYPES)]  # the dtype map's keys: a precision it cannot map is no value
DeviceKind = Literal["auto", "cpu", "cuda"]
CompileMode = Literal["off", "default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune"]
OptimizerImpl = Literal["default", "foreach", "fused"]
WaitPolicy = Literal["default", "PASSIVE", "ACTIVE"]
Malloc = Literal["default", "retain"]


@dataclass(frozen=True)
class Knob:
    """One Params field and what tuner knows about it: tuner.config.Params is built from these (`annotation`,
    `default`, `domain`, `doc`, `coerce`), so a new knob is one entry here."""

    name: str
    role: Role
    moves: tuple[Ceiling, ...]  # the ceilings whose cache key holds it
    pytorch: str | Callable[[Any], str]  # plain PyTorch, `{value}` filled in (the export's text)
    annotation: Any  # the Params field's type
    default: Any  # tuner's default: what a config that leaves the knob out runs with
    doc: str  # the Params field's description (the config reference's row)
    domain: Mapping[str, Any] = field(default_factory=dict)  # the field's bounds, as pydantic's Field takes them
    coerce: Callable[[Any], Any] | None = None  # turns a spelling users write into the field's value, before checks
    needs: tuple[Need, ...] = ()
    # The ceiling a study probes to decide this knob instead of sampling it: a speed knob always; a numerics knob
    # only where the study's parity check found every value it may pick within seed noise (tuner.search._speed_probe).
    probe: Ceiling | None = None
    what: str = ""  # one phrase for the README's table
    counts: tuple[Count, ...] = ()  # of_peak's cached figures whose key holds it (tuner.measure.flops)
    heavier: bool = False  # a step's work grows with its value: the pre-flight times the space's top of each
    hyperparameter: str | None = None  # the workload's optimizer setting it stands for ("lr", "betas")
    # Other knobs' values it acts under (TF32 rounds fp32 matmuls only: under fp16/bf16 autocast it changes nothing),
    # so a choice that sets those otherwise drops it (`acts`).
    acts_with: tuple[tuple[str, Any], ...] = ()
    # The environment variables the knob is applied through, before torch loads (libgomp reads OMP_WAIT_POLICY
    # once; glibc's malloc its thresholds at its first call): a value other than `default` is set in a trial's
    # process, and probed in fresh processes, never in a loaded one. All it may set, so "unset" knows each.
    env: tuple[str, ...] = ()
    # What each value sets (`env_sets`), where a value is not simply its one variable's string (malloc's `retain`
    # sets two thresholds); `default` sets nothing.
    env_values: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    env_read: str = "when torch loads"  # when its variables are read: why a loaded process cannot try a value
    # Variables that decide what its own decide (GOMP_SPINCOUNT and KMP_BLOCKTIME the wait policy; glibc's tunables
    # and a preloaded allocator, jemalloc or tcmalloc, glibc's malloc): one the user set makes the knob theirs.
    env_too: tuple[str, ...] = ()
    # The sampling context's name its None default stands for in a space (torch's default thread count is the
    # trial's CPUs): the baseline trial takes that value, not a draw.
    default_from: str | None = None
    # Its best value moves with what else the machine runs (spinning threads win alone, lose beside other work): a
    # value a study chose while the machine was busy is not picked in place of the user's own (tuner.analysis.held).
    load_sensitive: bool = False

    def env_sets(self, value: Any) -> dict[str, str]:
        """The environment variables the knob at `value` sets before torch loads ({} for `default`: tuner sets
        nothing, the user's environment stays as it is)."""
        if not self.env or value in (None, "default"):
            return {}
        if self.env_values:
            return dict(self.env_values[str(value)])
        return {self.env[0]: str(value)}

    def spell(self, value: Any) -> str:
        """The knob at `value` as a user writes it in plain PyTorch."""
        return self.pytorch(value) if callable(self.pytorch) else self.pytorch.format(value=value)

    @property
    def needs_text(self) -> str:
        return ", ".join(NEEDS_TEXT[n] for n in self.needs)


def _accumulation(value: Any) -> str:
    if int(value) == 1:
        return "no accumulation: optimizer.step() after every micro-batch"
    return f"loss / {value} per micro-batch; optimizer.step() every {value} micro-batches"


def _precision(value: Any) -> str:
    if value == "fp32":
        return "no autocast, no GradScaler"
    scaler = "; scaler = torch.amp.GradScaler(device_type) (fp16 only)" if value == "fp16" else ""
    return f"with torch.autocast(device_type, dtype={PRECISION_DTYPES[value]}): loss = ...{scaler}"


def _channels_last(value: Any) -> str:
    if not value:
        return "torch's default (contiguous) memory format"
    return ("model.to(memory_format=torch.channels_last); x = x.contiguous(memory_format=torch.channels_last) "
            "for each 4-D input")


def _optimizer_impl(value: Any) -> str:
    if value == "default":
        return "the optimizer as the workload builds it (tuner's own Adam: fused=True on CUDA)"
    return f"torch.optim.Adam(params, ..., {value}=True)  # any torch.optim optimizer that takes {value}="


def _wait_policy(value: Any) -> str:
    if value in ("default", None):
        return "the environment as you have it (libgomp's default when unset: spin a while, then sleep)"
    return f"OMP_WAIT_POLICY={value} python train.py  # set before torch loads; libgomp reads it once"


# glibc's malloc returns freed memory to the system (issue 58, lab notes' twenty-sixth session): above its dynamic
# mmap threshold it maps each large tensor fresh and trims the heap's top, so a plain CPU training step re-faults and
# zeroes its pages every step (4,500-6,700 minor faults a DCGAN fp32 step, ~10 ms of ~85). Both thresholds go
# together: the trim threshold alone pins the mmap threshold at 128 KiB and the faults grow (40,000 a step).
MALLOC_RETAIN = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}


def _malloc(value: Any) -> str:
    if value in ("default", None):
        return "the allocator as you have it (glibc's malloc: maps large tensors fresh each step and trims its heap)"
    return (" ".join(f"{k}={v}" for k, v in MALLOC_RETAIN.items()) +
            " python train.py  # in the shell, before python starts; glibc's malloc (Linux) reads them once")


def glibc() -> bool:
    """Whether this process runs on glibc (Linux): where MALLOC_*_THRESHOLD_ mean anything."""
    import platform

    return platform.libc_ver()[0] == "glibc"


_MALLOPT = {"MALLOC_TRIM_THRESHOLD_": -1, "MALLOC_MMAP_THRESHOLD_": -3}  # glibc's M_TRIM_THRESHOLD, M_MMAP_THRESHOLD


def apply_malloc(env: Mapping[str, str]) -> list[str]:
    """glibc reads MALLOC_*_THRESHOLD_ once, at the process's first malloc (python's start), so a running process
    that sets them (`tuner train --config` applying a config's `retain`) sets the same through mallopt; the
    variables set, [] where none is given or there is no glibc (then they do nothing, and harm nothing)."""
    import ctypes

    given = {k: int(v) for k, v in env.items() if k in _MALLOPT and str(v).isdigit()}
    if not given or not glibc():
        return []
    libc = ctypes.CDLL(None)
    return [k for k, v in given.items() if libc.mallopt(_MALLOPT[k], v) == 1]


def env_acts(name: str) -> str | None:
    """Why knob `name`'s variables do nothing on this machine (None: they act): malloc's thresholds are glibc's.
    Such a knob is not probed; a config that sets it still runs (the variables are harmless elsewhere)."""
    if name == "malloc" and not glibc():
        return "no glibc here (its thresholds are glibc malloc's; other allocators ignore them)"
    return None


def _threads(value: Any) -> str:
    if value is None:
        return "torch's thread count as you have it (its default: one per physical core, or OMP_NUM_THREADS)"
    return f"torch.set_num_threads({value})  # or OMP_NUM_THREADS={value} before torch loads"


def _compile(value: Any) -> str:
    if value in ("off", False, None):
        return "eager: no torch.compile"
    return f"model = torch.compile(model, mode={value!r})  # each model; state_dict from the model before it"


def _compile_off(value: Any) -> Any:
    """YAML 1.1 reads a bare `off` (and `false`) as False: that is compile off, not an error."""
    return "off" if value is False else value


def _policy_case(value: Any) -> Any:
    """OpenMP reads the variable case-insensitively: `passive` is PASSIVE."""
    return value.upper() if isinstance(value, str) and value.lower() in ("passive", "active") else value


# One entry per knob, in the order a config lists them: its role, the ceilings it moves, its plain-PyTorch line,
# then its Params field (type, default, domain, description) and what else tuner knows of it.
KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("batch_size", "learned", CEILINGS,
         "DataLoader(..., batch_size={value}, shuffle=True, drop_last=True); an epoch keeps whole effective batches "
         "(batch_size x accumulation_steps)",
         annotation=int, default=64, domain=dict(ge=1, le=65536), doc="micro-batch size per step",
         what="micro-batch size (effective batch = batch_size x accumulation_steps)", counts=("flops",), heavier=True),
    Knob("accumulation_steps", "learned", ("compute",), _accumulation,
         annotation=int, default=1, domain=dict(ge=1, le=1024), doc="micro-batches per optimizer step",
         what="micro-batches per optimizer step", heavier=True),
    Knob("num_workers", "speed", ("input",), "DataLoader(..., num_workers={value})",
         annotation=int, default=0, domain=dict(ge=0, le=128),
         doc="DataLoader worker processes (0: load in the training process)",
         probe="input", what="DataLoader worker processes"),
    Knob("prefetch_factor", "speed", ("input",), "DataLoader(..., prefetch_factor={value})",
         annotation=int | None, default=None, domain=dict(ge=1, le=64), doc="only with num_workers > 0",
         needs=("workers",), probe="input", what="batches each worker loads ahead"),
    Knob("persistent_workers", "speed", ("input",), "DataLoader(..., persistent_workers={value})",
         annotation=bool, default=False, doc="only with num_workers > 0",
         needs=("workers",), probe="input", what="workers kept between epochs"),
    Knob("pin_memory", "speed", ("input",), "DataLoader(..., pin_memory={value}); batch.to(device, non_blocking=True)",
         annotation=bool, default=False, doc="only with CUDA",
         needs=("cuda",), probe="input", what="page-locked host memory for the copy to the GPU"),
    Knob("precision", "numerics", ("compute",), _precision,
         annotation=Precision, default="fp32", doc="autocast dtype (GradScaler for fp16); the device must support it",
         probe="compute", what="`fp32`, `fp16`, `bf16` autocast; GradScaler for fp16 only (numerics)",
         counts=("peak",)),
    Knob("tf32", "numerics", ("compute",),
         "torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = {value}",
         annotation=bool, default=False, doc="TF32 for fp32 matmuls/convolutions (CUDA, Ampere or newer)",
         needs=("ampere",), probe="compute",
         what="TF32 tensor cores for fp32 matmuls and convolutions (numerics; shown as `fp32 + TF32`)",
         counts=("peak",), acts_with=(("precision", "fp32"),)),
    Knob("channels_last", "speed", ("compute",), _channels_last,
         annotation=bool, default=False, doc="the models and 4-D inputs in channels_last memory format",
         probe="compute", what="NHWC memory format of the models and their 4-D inputs (image workloads)"),
    Knob("cudnn_benchmark", "speed", ("compute",), "torch.backends.cudnn.benchmark = {value}",
         annotation=bool, default=False, doc="torch.backends.cudnn.benchmark (CUDA only)",
         needs=("cuda",), probe="compute",
         what="cuDNN tries its convolution algorithms and keeps the fastest per shape"),
    Knob("optimizer_impl", "speed", ("compute",), _optimizer_impl,
         annotation=OptimizerImpl, default="default",
         doc="foreach= or fused= passed to the optimizer (default: as the workload builds it)",
         probe="compute",
         what="the optimizer's implementation: `default`, `foreach` or `fused` (where the optimizer takes it)"),
    # Numerics: a compiled graph rounds differently (fused kernels), so compile is parity-tested like precision;
    # the CUDA-graph modes (reduce-overhead, max-autotune) are refused on a CPU by Device.check_compile, as they
    # need CUDA for some values only.
    Knob("compile", "numerics", ("compute",), _compile,
         annotation=CompileMode, default="off", coerce=_compile_off,
         doc="torch.compile(model, mode=...) on each of the workload's models; reduce-overhead and max-autotune only "
             "with CUDA",
         what="torch.compile mode: `off`, `default`, `max-autotune-no-cudagraphs`; on CUDA also `reduce-overhead`, "
              "`max-autotune` (numerics; its compile time is measured apart)"),
    Knob("lr", "learned", (), "torch.optim.Adam(params, lr={value})",
         annotation=float | None, default=None, domain=dict(gt=0, allow_inf_nan=False),
         doc="the optimizer's lr (default: the workload's own); any finite positive lr, as the workload's "
             "hyperparameters take",
         what="the optimizer's lr", hyperparameter="lr"),
    Knob("lr_scale", "learned", (), "lr = the workload's lr x {value}",
         annotation=float | None, default=None, domain=dict(gt=0, le=1000),
         doc="multiplies the lr (the workload's own, or params.lr): spaces search lr relative to the workload's",
         what="multiplies the lr", hyperparameter="lr"),
    Knob("beta1", "learned", (), "betas=({value}, beta2)",
         annotation=float | None, default=None, domain=dict(ge=0, lt=1), doc="default: the workload's own betas",
         what="Adam's beta1", hyperparameter="betas"),
    Knob("beta2", "learned", (), "betas=(beta1, {value})",
         annotation=float | None, default=None, domain=dict(ge=0, lt=1), doc="default: the workload's own betas",
         what="Adam's beta2", hyperparameter="betas"),
    # The CPU's threading: how many threads torch computes with and how they wait at a barrier. Their best values
    # depend on the machine and on what else runs on it (a spinning wait took 44x longer beside other work, a
    # passive one 1.4-1.7x longer on a quiet CPU), so a CPU study probes them rather than setting either.
    Knob("threads", "speed", CEILINGS, _threads,
         annotation=int | None, default=None, domain=dict(ge=1, le=1024),
         doc="torch CPU compute threads (default: torch's)",
         probe="compute", what="torch's CPU compute threads", counts=("peak",), default_from="cpus",
         load_sensitive=True),
    Knob("omp_wait_policy", "speed", CEILINGS, _wait_policy,
         annotation=WaitPolicy, default="default", coerce=_policy_case,
         doc="OMP_WAIT_POLICY for torch's OpenMP threads, set before torch loads (default: the environment as the "
             "user has it)",
         probe="compute", env=("OMP_WAIT_POLICY",), env_too=("GOMP_SPINCOUNT", "KMP_BLOCKTIME"),
         what="how torch's OpenMP threads wait at a barrier: `default` (yours), `PASSIVE` (sleep) or `ACTIVE` "
              "(spin); set before torch loads", counts=("peak",), load_sensitive=True),
    Knob("malloc", "speed", CEILINGS, _malloc,
         annotation=Malloc, default="default",
         doc="glibc malloc's thresholds, set before python starts: retain keeps freed memory in the process "
             "(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_); default: the allocator as the user has it",
         probe="compute", env=tuple(MALLOC_RETAIN), env_values={"retain": MALLOC_RETAIN},
         env_read="when python starts", env_too=("GLIBC_TUNABLES", "LD_PRELOAD"),
         what="glibc's allocator: `default` (yours) or `retain` (freed memory kept in the process: far fewer page "
              "faults a step); set before python starts (Linux, glibc)"),
    Knob("seed", "run", (), "torch.manual_seed({value})",
         annotation=int, default=0, domain=dict(ge=0), doc="the same initial weights for every knob",
         what="the run's seed"),
    # The ceiling keys hold the resolved device (`cuda (NVIDIA H100)`), not this spelling (`auto`).
    Knob("device", "run", (), "device = torch.device({value!r})",
         annotation=DeviceKind, default="auto", doc="auto: CUDA when there is one", what="auto, cpu or cuda"),
)}


def knob_env(params: Any) -> dict[str, str]:
    """The environment variables `params`' knobs set (those applied through the environment, `Knob.env`): what a
    process must have before torch loads to run them. {} for defaults: tuner sets nothing of its own."""
    out: dict[str, str] = {}
    for k in KNOBS.values():
        if k.env:
            out.update(k.env_sets(getattr(params, k.name, None)))
    return out


def env_knobs() -> tuple[str, ...]:
    """The knobs applied through the environment before torch loads: probed in fresh processes only."""
    return tuple(k.name for k in KNOBS.values() if k.env)


def env_vars() -> tuple[str, ...]:
    """Every variable an environment knob may set (OMP_WAIT_POLICY, malloc's thresholds): what a fork server is
    keyed by, and what a process that must run at a knob's default has unset."""
    return tuple(v for k in KNOBS.values() for v in k.env)


def load_knobs() -> tuple[str, ...]:
    """The knobs whose best value moves with the machine's other work (`Knob.load_sensitive`): threads, wait policy."""
    return tuple(k.name for k in KNOBS.values() if k.load_sensitive)


def knob(name: str) -> Knob:
    return KNOBS[name]


def ceiling_knobs(ceiling: Ceiling) -> tuple[str, ...]:
    """The knobs a ceiling's cache key holds."""
    return tuple(k.name for k in KNOBS.values() if ceiling in k.moves)


def count_knobs(count: Count) -> tuple[str, ...]:
    """The knobs the cache key of one of of_peak's figures holds (`flops`: FLOPs per sample, `peak`: the peak)."""
    return tuple(k.name for k in KNOBS.values() if count in k.counts)


def numerics_knobs() -> tuple[str, ...]:
    """The knobs that change only rounding: what a parity test against fp32 judges (tuner.parity)."""
    return tuple(k.name for k in KNOBS.values() if k.role == "numerics")


def probed(ceiling: Ceiling) -> tuple[str, ...]:
    """The speed knobs a study decides by probing `ceiling`: `input` the loader knobs, `compute` the others."""
    return tuple(k.name for k in KNOBS.values() if k.probe == ceiling and k.role == "speed")


def parity_probed() -> tuple[str, ...]:
    """The numerics knobs a study decides by compute probes once its parity check found every value it may pick
    within seed noise (precision, TF32); the others (compile: its compile time does not fit a probe) stay with
    the trials."""
    return tuple(k.name for k in KNOBS.values() if k.probe == "compute" and k.role == "numerics")


def heavy_knobs() -> tuple[str, ...]:
    """The knobs a step's work grows with, the effective batch's factors, micro-batch first (batch_size,
    accumulation_steps): the slowest step is at their top, and a space that keeps the effective batch splits it."""
    return tuple(k.name for k in KNOBS.values() if k.heavier)


def hyperparameter_knobs() -> tuple[str, ...]:
    """The knobs that stand for the workload's own optimizer settings (lr, lr_scale, the betas): a space may
    search them only where the workload's optimizer takes that setting (`Knob.hyperparameter`)."""
    return tuple(k.name for k in KNOBS.values() if k.hyperparameter is not None)


def acts(name: str, values: dict[str, Any]) -> bool:
    """Whether knob `name` changes anything beside `values` (other knobs' values; one not given is taken as what
    the knob acts with): False for TF32 beside a chosen bf16, whose autocast leaves no fp32 matmul to round."""
    return all(values.get(k, v) == v for k, v in KNOBS[name].acts_with)


WORKERS = "num_workers"  # the knob the `workers` need names


def worker_knobs() -> tuple[str, ...]:
    """num_workers and the knobs that need workers: what loading in the training process leaves at its default."""
    return tuple(k.name for k in KNOBS.values() if k.name == WORKERS or "workers" in k.needs)


def dropped_here(name: str, *, cuda: bool, tf32_available: bool) -> str | None:
    """Why a knob cannot be used on this machine (None: it can): what `tuner spaces show` and the refusals say."""
    needs = KNOBS[name].needs
    if "ampere" in needs and not tf32_available:
        return "no CUDA GPU of the Ampere generation or newer"
    if "cuda" in needs and not cuda:
        return "no CUDA device"
    return None


def check_device(params: Any, device: Any, names: Any = None) -> None:
    """A knob set on a device that lacks what it needs is one DeviceError line naming it and the fix (exit 2).
    `names`: only these knobs (the loader checks its own, `probed("input")`); None: every knob."""
    from tuner.errors import DeviceError

    for k in KNOBS.values():
        if names is not None and k.name not in names:
            continue
        if not {"cuda", "ampere"} & set(k.needs) or not getattr(params, k.name, None):
            continue
        if "ampere" in k.needs and not device.tf32_available():
            raise DeviceError(f"{k.name} needs a CUDA GPU of the Ampere generation or newer; {device.describe()} has "
                              f"none; set {k.name}: false")
        if "cuda" in k.needs and not device.is_cuda:
            raise DeviceError(f"{k.name} needs a CUDA device; set {k.name}: false on the CPU")


def role_text(name: str, *, batch_statistics: bool | None = None) -> str:
    """A knob's role in words, as the README's table and the HTML report say it ("the workload's own" for a
    hyperparameter tuner does not know: a user workload's). `batch_statistics`: for a study that kept its
    effective batch and split it, whether the models have batch-statistics layers (None: not such a study), which
    decides whether the split changes what is learned (issue 40)."""
    k = KNOBS.get(name)
    if k is None:
        return "the workload's own"
    if name in heavy_knobs() and batch_statistics is not None:  # the split of an effective batch
        if batch_statistics:
            return ("what is learned (the split of a fixed effective batch, seen by the model's batch statistics), "
                    "and speed")
        return "speed only (the split of a fixed effective batch: the same gradient without batch statistics)"
    if k.role == "run":
        return "names the run"
    if k.role == "numerics":
        return "numerics (rounding: parity-tested against fp32), and speed"
    return "speed only" if k.role == "speed" else "what is learned" + (", and speed" if k.moves else "")


def readme_table() -> str:
    """The README's knob table, generated (tests/test_knobs.py checks the README holds it)."""
    rows = ["| knob | role | needs | moves the ceiling | plain PyTorch |", "| --- | --- | --- | --- | --- |"]
    for k in KNOBS.values():
        if k.role == "run":
            continue
        role = role_text(k.name)
        example = {"precision": "bf16", "optimizer_impl": "fused", "channels_last": True,
                   "compile": "default", "accumulation_steps": 4, "malloc": "retain"}.get(k.name)
        how = k.pytorch if isinstance(k.pytorch, str) else k.spell(example)
        how = how.replace("{value}", "…").replace("|", "\\|")
        rows.append(f"| `{k.name}`: {k.what} | {role} | {k.needs_text or '-'} | "
                    f"{', '.join(k.moves) or 'none'} | `{how}` |")
    return "\n".join(rows)
