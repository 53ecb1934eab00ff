"""`params.compile`: torch.compile applied to the workload's models as a user would, and what it costs.

Each model the workload builds becomes `torch.compile(model, mode=...)` (after DDP's wrapper, as PyTorch's DDP
notes advise), never changed otherwise: evaluation, the optimizer's parameters and every state_dict use the user's
own module under the wrapper (`tuner.train.distributed.unwrap` strips `_orig_mod`), so keys carry no `_orig_mod.`
prefix and quality is scored in eager mode on the weights the compiled model trained. The models, not the step
function, are compiled: the step holds autocast, GradScaler, accumulation and the optimizer, whose Python control
flow would break the graph at every micro-batch; the user's forward is what a user compiles.

Compilation happens in the first steps (Dynamo traces on the first call, AOTAutograd compiles the backward on the
first backward). Compile counters (`torch._dynamo.utils.counters`: frames compiled, graph breaks with their
reasons; `guard_failures`: why a frame recompiled) tell when those steps end: the first step that compiles no
frame. Those steps are `compile_seconds`, outside the budget's timed part (see tuner.train.loop). A frame that
recompiles on each of the first COMPILE_MAX_STEPS steps (fewer than Dynamo's recompile limit of 8, after which it
would silently fall back to eager) is a CompileFailed with Dynamo's own reason.

Reuse across the trials of one process: Dynamo's in-memory cache is per code object (the user's `forward`), and
since nn.Module inlining (default in torch 2.14) a fresh instance of the same class with the same shapes, grad
mode and autocast state reuses the graph without compiling (measured here: 25 s for a tiny MLP's first compile,
0.0 s for a second instance in the same process). Across processes and after a different mode, Inductor's FX graph
cache and AOTAutograd's cache (on disk, default on) skip code generation for a graph already compiled, but
Dynamo still traces. A trial whose mode differs from the previous compiled trial of its process resets Dynamo
(`torch._dynamo.reset()`), so entries of other modes do not count towards the recompile limit.

The first steps run within a compile limit derived from the budget (`compile_limit`): a compile once hung for over
600 s on a 6 s-budget run that took 14-20 s when rerun (issue 37). Past it the trial ends as `compile_timeout`:
the compile is interrupted in the trial's thread; one stuck in native code ends `tuner train`'s process with the
message, and a search's trial is ended by its driver (tuner.search._watch), which the trial told of the limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

COMPILE_MAX_STEPS = 5  # a frame still compiling after this many steps recompiles on every step
COMPILE_LIMIT_MIN_S = 180.0  # the compile limit: this at least (a cold compile of a small model took 14-25 s here)
COMPILE_LIMIT_BUDGETS = 10.0  # ... or this many seconds budgets
COMPILE_LIMIT_SAMPLES_S = 600.0  # ... and for a samples budget (no seconds to derive it from)
BACKEND = "inductor"  # torch.compile's default; tests plant "eager" to count Dynamo's work without code generation

_last_mode: list[str] = []  # the mode of the previous compiled trial of this process


class CompileFailed(Exception):
    """torch.compile could not compile a model, or recompiles on every step: a trial state, with its one line."""


class CompileTimeout(Exception):
    """torch.compile's first steps ran past the compile limit: the trial's state is `compile_timeout`."""


def compile_limit(budget: Any) -> float:
    """How long a trial's compile (its first steps, outside the budget) may take: 10 budgets, at least 180 s; 600 s
    for a samples budget."""
    if budget.seconds is None:
        return COMPILE_LIMIT_SAMPLES_S
    return max(COMPILE_LIMIT_MIN_S, COMPILE_LIMIT_BUDGETS * float(budget.seconds))


def compile_timed_out(err: BaseException) -> CompileTimeout | None:
    """The CompileTimeout in an exception's chain (Dynamo wraps what its backend raised), or None."""
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        if isinstance(e, CompileTimeout):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def compile_models(models: dict[str, Any], mode: str) -> dict[str, Any]:
    """Each model as `torch.compile(model, mode=mode)`; `mode == "off"` returns them as they are."""
    if mode == "off":
        return models
    import torch

    if _last_mode and _last_mode[0] != mode:
        torch._dynamo.reset()
    _last_mode[:] = [mode]
    return {k: torch.compile(m, mode=mode, backend=BACKEND) for k, m in models.items()}


def _counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def frames_compiled() -> int:
    """Frames Dynamo has compiled in this process (first compiles and recompiles)."""
    return int(_counters()["frames"]["total"])


def graph_breaks() -> int:
    return int(sum(_counters()["graph_break"].values()))


def recompile_reason() -> str:
    """Dynamo's last guard failure (why a frame recompiled), as one line."""
    from torch._dynamo.utils import guard_failures

    reasons = [r for failures in guard_failures.values() for r in failures]
    if not reasons:
        return "no reason recorded"
    first = reasons[-1].strip().splitlines()[0]
    return " ".join(first.split())


def is_compile_error(err: BaseException) -> bool:
    """Whether the compiler raised (Dynamo tracing, the backend's compile), anywhere in the exception's chain."""
    try:
        from torch._dynamo.exc import TorchDynamoException
    except ImportError:  # pragma: no cover - torch without Dynamo
        return False
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        if isinstance(e, (TorchDynamoException, CompileFailed)):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def compile_error_line(err: BaseException, mode: str) -> str:
    """The compiler's own reason in one line, naming the mode (its first line holds the reason; the rest is
    Dynamo's explanation and hints)."""
    if isinstance(err, CompileFailed):
        return str(err)
    lines = [" ".join(line.split()) for line in str(err).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    # Dynamo's first line is often a heading ("backend='inductor' raised:", "Failed to trace builtin operator")
    # whose substance is the next line (the backend's exception, "Explanation: ...").
    if len(lines) > 1 and (first.endswith(":") or lines[1].startswith("Explanation:")):
        first = f"{first} {lines[1]}"
    return f"torch.compile (mode {mode}) failed: {type(err).__name__}{': ' + first if first else ''}"


@dataclass
class CompileWarmup:
    """What the first steps of a compiled trial took."""

    seconds: float = 0.0
    steps: int = 0
    samples: int = 0
    graph_breaks: int = 0


_breaks_seen: dict[tuple[Any, ...], int] = {}  # graphs_key(...) -> graph breaks when those graphs were traced


def graphs_key(mode: str, models: dict[str, Any], params: Any = None) -> tuple[Any, ...]:
    """What picks the graphs Dynamo reuses from its cache: the models' classes themselves (two workloads' `Net`
    are different code, which a class name does not tell apart), the mode, and the knobs that change what the step
    computes (the role table's compute-ceiling knobs: batch size, precision, memory format, ...)."""
    from tuner.knobs import ceiling_knobs

    classes = tuple(sorted(((k, type(unwrap_compiled(m))) for k, m in models.items()), key=lambda kv: kv[0]))
    knobs = tuple((n, getattr(params, n, None)) for n in ceiling_knobs("compute")) if params is not None else ()
    return classes, mode, knobs


class CompileWatch:
    """The compile counters of one trial, as differences from its start (the counters are process-wide)."""

    def __init__(self, mode: str, models: dict[str, Any], params: Any = None, limit_s: float | None = None,
                 on_done: Any = None) -> None:
        self.mode = mode
        self.key = graphs_key(mode, models, params)
        self.frames0, self.breaks0 = frames_compiled(), graph_breaks()
        self.warm_frames = 0
        self.limit_s = limit_s  # the compile limit (compile_limit); None: none
        self.on_done = on_done  # called once the first steps are done (a search trial tells its driver)

    def frames(self) -> int:
        return frames_compiled() - self.frames0

    def end_warmup(self) -> None:
        self.warm_frames = self.frames()

    def graph_breaks(self) -> int:
        """Graph breaks of this trial's graphs: counted while tracing, or remembered from this process's earlier
        trace of the same models and mode when the graphs came from Dynamo's cache (nothing traced)."""
        if self.frames() > 0:
            _breaks_seen[self.key] = graph_breaks() - self.breaks0
        return _breaks_seen.get(self.key, 0)

    def recompiles(self) -> int:
        """Frames compiled after the compile warm-up: while timed steps ran (each one a stall in the windows)."""
        return self.frames() - self.warm_frames

    def failed_to_settle(self, steps: int) -> CompileFailed:
        return CompileFailed(f"torch.compile (mode {self.mode}) recompiled on each of the first {steps} steps "
                             f"({self.frames()} compiles): {recompile_reason()}")


def unwrap_compiled(model: Any) -> Any:
    inner = getattr(model, "_orig_mod", None)
    return inner if inner is not None else model


def run_compile_warmup(step: Any, batches: Iterator[Any], watch: CompileWatch, device: Any, clock: Any,
                       agree: Any) -> CompileWarmup:
    """Steps until one compiles nothing (the compiled graphs run), at most COMPILE_MAX_STEPS; each synced. Under
    DDP every rank stops at the same step. Within the watch's compile limit (CompileTimeout past it)."""
    import threading

    from tuner.train.deadline import time_limit

    out = CompileWarmup()
    t0 = clock()
    message = (f"torch.compile (mode {watch.mode}) did not finish its first steps within {watch.limit_s or 0:g} s "
               f"(the compile limit: {COMPILE_LIMIT_BUDGETS:g} budgets, at least {COMPILE_LIMIT_MIN_S:g} s)")
    # outside the main thread (a search's trial) a compile stuck in native code is its driver's to end
    main = threading.current_thread() is threading.main_thread()
    try:
        with time_limit(watch.limit_s, message, CompileTimeout, "torch.compile's first steps", note_after=60.0,
                        **({} if main else {"grace": None})):
            for _ in range(COMPILE_MAX_STEPS):
                before = watch.frames()
                out.samples += step(batches)
                out.steps += 1
                device.synchronize()
                if not agree.any(watch.frames() > before):
                    break
            else:
                raise watch.failed_to_settle(out.steps)
    except Exception as err:
        if not isinstance(err, CompileTimeout) and compile_timed_out(err) is not None:  # wrapped by Dynamo
            raise CompileTimeout(message) from None
        raise
    out.seconds = clock() - t0
    watch.end_warmup()
    if watch.on_done is not None:
        watch.on_done()
    out.graph_breaks = watch.graph_breaks()
    return out
