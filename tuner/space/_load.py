"""Finding and loading spaces: the bundled ones (`search_spaces/`, installed as `tuner.spaces`), or a user's YAML
file, validated against the config so that a space that could propose an invalid trial is refused before any trial
runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from tuner.config import Params, TrialConfig, format_validation_error
from tuner.errors import ConfigError
from tuner.knobs import KNOBS, dropped_here, env_acts
from tuner.space._expr import PLAUSIBLE, describe_resources, is_expression, parse_expr, plausible_resources
from tuner.space._condition import CONTEXT_NAMES, Condition
from tuner.space._param import NATIVE_PARAMS, ParamSpec, evaluate_bound, overflow_message
from tuner.space._space import SPACE_SUFFIXES, Space, spaces_dir
from tuner.study import BY_KEY, Objective, QUALITY


def list_spaces() -> list[Space]:
    """Every bundled space, by name. A file that does not parse is listed by load_space's error instead."""
    d = spaces_dir()
    files = sorted(p for p in d.glob("*") if p.suffix in SPACE_SUFFIXES) if d.is_dir() else []
    return [load_space_file(p) for p in files]


def space_names() -> list[str]:
    d = spaces_dir()
    return sorted(p.stem for p in d.glob("*") if p.suffix in SPACE_SUFFIXES) if d.is_dir() else []


def resolve_space_path(name_or_path: str) -> Path:
    """A bundled space's name (`amp_loader`) or a path to a user's YAML file."""
    text = str(name_or_path).strip()
    as_path = Path(text).expanduser()
    looks_like_path = "/" in text or as_path.suffix in SPACE_SUFFIXES or as_path.is_file()
    if looks_like_path:
        if not as_path.exists():  # a folder, a binary or an empty file: load_space says what it is
            raise ConfigError(f"space file {as_path} does not exist; give a bundled space name "
                              f"({', '.join(space_names()) or 'none found'}) or a path to a YAML file")
        return as_path.resolve()
    for suffix in SPACE_SUFFIXES:
        candidate = spaces_dir() / f"{text}{suffix}"
        if candidate.is_file():
            return candidate
    raise ConfigError(f"unknown space {text!r}; known: {', '.join(space_names()) or 'none'} "
                      f"(see `tuner spaces`), or give a path to a YAML file")


def load_space(name_or_path: str) -> Space:
    return load_space_file(resolve_space_path(name_or_path))


def load_space_file(path: Path) -> Space:
    """Read and validate a space file; every error names the file and the key."""
    from tuner.files import load_yaml_mapping

    path = Path(path)
    data = load_yaml_mapping(path, "space file")
    return parse_space(data, source=str(path), name=path.stem)


def parse_space(data: Any, *, source: str, name: str) -> Space:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with keys description, defaults, objectives, params")
    if "params" not in data or "objectives" not in data:
        missing = "params" if "params" not in data else "objectives"
        raise ConfigError(f"{source}: {missing}: missing (a space needs params and objectives)")
    try:
        space = Space.model_validate({**data, "name": name, "source": source})
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, Space, hidden=("name", "source"))) from None
    _check_against_config(space, source)
    return space


def _check_against_config(space: Space, source: str) -> None:
    """Names must be Params fields, every domain value a valid value of that field, conditions well-formed,
    objectives known metrics, and the `trial:` section plus defaults a valid TrialConfig."""
    fields = Params.model_fields
    if not space.searched:
        raise ConfigError(f"{source}: params: nothing to search (every param is fixed); give at least one a type")
    seen: list[str] = []
    for name, spec in space.params.items():
        key = f"{source}: params.{name}"
        if name == "effective_batch":
            raise ConfigError(f"{key}: effective_batch goes at the top level of the space (beside params), as "
                              f"effective_batch: {{type: int, low, high}}; batch_size is then its micro-batch")
        if name not in fields:
            raise ConfigError(f"{key}: unknown param; use one of {', '.join(fields)}")
        field = fields[name]
        adapter = TypeAdapter(Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation)
        for value in spec.endpoints():
            try:
                adapter.validate_python(value)
            except ValidationError as err:
                msg = err.errors()[0]["msg"]
                raise ConfigError(f"{key}: value {value!r} is not valid for {name}: {msg}") from None
        if spec.type == "float" and fields[name].annotation is int:
            raise ConfigError(f"{key}: {name} is a whole number; use type int")
        if spec.has_expressions:
            check_expressions(name, spec, key, adapter)
        if spec.native and name not in NATIVE_PARAMS:
            raise ConfigError(f"{key}.native: only {', '.join(NATIVE_PARAMS)} has native choices; drop native")
        try:
            conditions = spec.conditions()
        except (ValueError, ValidationError) as err:
            raise ConfigError(f"{key}.when: {err}") from None
        for c in conditions:
            if c.name not in seen and c.name not in CONTEXT_NAMES:
                where = "a later param" if c.name in space.params else "not a param"
                raise ConfigError(f"{key}.when.{c.name}: {where}; a condition may name an earlier param or "
                                  f"{', '.join(CONTEXT_NAMES)}")
            never = never_holds(c, space.params.get(c.name))
            if never is not None:
                raise ConfigError(f"{key}.when.{c.name}: {c.describe()} can never hold ({never}), so {name} would "
                                  f"never be searched; fix the condition, or drop it")
        if name == "tf32" and spec.type is not None and not any(c.name == "tf32_available" for c in conditions):
            raise ConfigError(f"{key}.when: add tf32_available: true (TF32 exists only on CUDA GPUs of the Ampere "
                              f"generation or newer; trials elsewhere would fail), e.g. when: {{precision: fp32, "
                              f"tf32_available: true}}")
        if name == "compile" and spec.type is not None and not any(c.name == "gpus" for c in conditions):
            from tuner.knobs import CUDA_COMPILE_MODES

            cuda_only = [v for v in (spec.choices or []) if v in CUDA_COMPILE_MODES]
            if cuda_only:
                raise ConfigError(f"{key}.when: {', '.join(cuda_only)} capture CUDA graphs and run only on CUDA; add "
                                  f"when: {{gpus: \">0\"}}, or list only off, default, max-autotune-no-cudagraphs")
        needs = KNOBS[name].needs if name in KNOBS else ()
        if "cuda" in needs and spec.type is not None and not any(c.name in ("gpus", "tf32_available") for c in conditions):
            raise ConfigError(f"{key}.when: add gpus: \">0\" ({name} exists only on CUDA devices; trials on a CPU "
                              f"would be refused), e.g. when: {{gpus: \">0\"}}")
        seen.append(name)
    from tuner.space._batch import check_batch

    check_batch(space, source)
    for workload, objectives in space.objectives.items():
        where = "objectives" if workload == "default" else f"objectives.{workload}"
        metrics = [o.metric for o in objectives]
        if not objectives:
            raise ConfigError(f"{source}: {where}: empty; give at least one {{metric, direction}}")
        for i, o in enumerate(objectives):
            objectives[i] = _complete(o, f"{source}: {where}.{i}")
        if len(set(metrics)) != len(metrics):
            raise ConfigError(f"{source}: {where}: a metric is listed twice")
    for banned in ("workload", "workload_options", "dataset", "budget", "gpus"):
        if banned in space.trial:
            raise ConfigError(f"{source}: trial.{banned}: set it under defaults (or on the command line), not trial")
    try:
        TrialConfig.model_validate({**space.trial, "params": dict(space.trial.get("params") or {})})
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, f"{source}: trial", TrialConfig)) from None




# The values a trial's resources take, as a condition sees them (tuner.search._context): (low, high, whole).
_CONTEXT_RANGES = {"cpus": (1.0, math.inf, True), "gpus": (0.0, math.inf, False)}


def never_holds(c: Condition, spec: ParamSpec | None) -> str | None:
    """Why condition `c` can hold for no value its param (`spec`; None for the trial's resources) can take, or None
    when some value meets it: a `when:` that never holds silently keeps its param from ever being searched."""
    if spec is None and c.name == "tf32_available":
        values: list[Any] | None = [False, True]
    elif spec is None:
        values = None
        low, high, whole = _CONTEXT_RANGES.get(c.name, (-math.inf, math.inf, False))
    elif spec.fixed or spec.type in ("bool", "categorical"):
        values = spec.endpoints()
    else:
        values = None
        low, high = (-math.inf if is_expression(spec.low) else spec.low), \
            (math.inf if is_expression(spec.high) else spec.high)
        whole = spec.type == "int"
    if values is not None:
        if any(c.holds(v) for v in values):
            return None
        return f"{c.name} is {values[0]!r}" if len(values) == 1 else \
            f"{c.name} is one of {', '.join(repr(v) for v in values)}"
    shown = f"{c.name} is a {'whole ' if whole else ''}number from {low:g} to {high:g}"
    if c.op == "!=":
        return shown if low == high == c.operand else None
    numbers = [x for x in (c.operand if c.op == "in" else [c.operand]) if isinstance(x, (int, float))
               and (not whole or float(x).is_integer() or c.op not in ("in", "=="))]
    if c.op in ("in", "=="):
        return None if any(low <= x <= high for x in numbers) else shown
    if not numbers:
        return shown
    x = numbers[0]
    can = {">": high > x, ">=": high >= x, "<": low < x, "<=": low <= x}[c.op]
    return None if can else shown


def check_expressions(name: str, spec: ParamSpec, key: str, adapter: TypeAdapter[Any]) -> None:
    """Expression bounds, checked like numbers but for every plausible trial (1-256 CPUs, 0-8 GPUs): they must
    evaluate (no division by zero), their values (clamped to the param's own limits) must be valid for the param,
    and the domain must be non-empty for some of those trials. Whether it is for the study's own trials is checked
    when the study starts (Space.resolve)."""
    names = tuple(dict.fromkeys(n for b in (spec.low, spec.high) if is_expression(b) for n in parse_expr(b).names))
    feasible = False
    checked: set[tuple[str, Any]] = set()
    for resources in plausible_resources(names):
        used = {k: v for k, v in resources.items() if k in names}
        ends = {}
        for which in ("low", "high"):
            try:
                _, value = evaluate_bound(spec, which, name, resources)
            except ZeroDivisionError:
                raise ConfigError(f"{key}.{which}: {getattr(spec, which)} divides by zero for trials with "
                                  f"{describe_resources(used)}") from None
            except OverflowError:
                raise ConfigError(overflow_message(key, which, spec, used)) from None
            ends[which] = value
            if is_expression(getattr(spec, which)) and (which, value) not in checked:
                checked.add((which, value))
                try:
                    adapter.validate_python(value)
                except ValidationError as err:
                    msg = err.errors()[0]["msg"]
                    raise ConfigError(f"{key}.{which}: {getattr(spec, which)} is {value!r} for trials with "
                                      f"{describe_resources(used)}, which is not valid for {name}: {msg}") from None
        if ends["low"] <= ends["high"] and not (spec.log and ends["low"] <= 0):
            feasible = True
    if not feasible:
        span = ", ".join(f"{n} {PLAUSIBLE[n][0]}-{PLAUSIBLE[n][-1]}" for n in names)
        raise ConfigError(f"{key}: low ({spec.low}) {'is not > 0' if spec.log else 'is greater than high'} "
                          f"({spec.high}) for every plausible trial ({span}); fix the bounds")


def clamp_notes(name: str, spec: ParamSpec) -> list[str]:
    """Where an expression bound is clamped to the param's own limit, in words (`tuner spaces show`)."""
    from tuner.space._param import field_limits

    notes = []
    lo, hi = field_limits(name, spec.type)
    for which in ("low", "high"):
        raw = getattr(spec, which)
        if not is_expression(raw):
            continue
        for resources in plausible_resources(parse_expr(raw).names):
            value, clamped = evaluate_bound(spec, which, name, resources)
            if value != clamped:
                limit = hi if value > clamped else lo
                side = "at most" if value > clamped else "at least"
                notes.append(f"{which} {raw} is clamped to the limit of {name} in the config ({side} {limit:g})")
                break
    return notes


def knob_notes(space: Space, context: dict[str, Any]) -> list[str]:
    """For each searched knob that needs something of the device (tuner.knobs), whether this machine's trials keep
    it and why, and how the study decides each speed-only knob (`tuner spaces show`)."""
    from tuner.space._batch import batch_note

    reachable = set(space.reachable(context))
    cuda = int(context.get("gpus") or 0) > 0
    out = [note] if (note := batch_note(space)) is not None else []
    for name in space.searched:
        k = KNOBS.get(name)
        if k is None:
            continue
        why = dropped_here(name, cuda=cuda, tf32_available=bool(context.get("tf32_available")))
        if why is None and name not in reachable:
            held = " and ".join(c.describe() for c in space.params[name].conditions() if c.name in CONTEXT_NAMES)
            why = f"the space searches it only when {held}" + ("" if cuda else " (no CUDA device here)")
        if why is not None:
            out.append(f"{name}: dropped, {why}")
        elif k.probe is not None and k.role == "numerics":
            out.append(f"{name}: kept, checked against fp32 (parity) first; decided by compute-ceiling probes where "
                       f"every value is within seed noise, else by the trials' quality")
        elif k.env and (idle := env_acts(name)) is not None:
            out.append(f"{name}: not probed, {idle}: left as yours")
        elif k.probe is not None and k.env:
            out.append(f"{name}: kept, decided by compute-ceiling probes at the baseline's batch, each value in a "
                       f"fresh process ({', '.join(k.env)} {'is' if len(k.env) == 1 else 'are'} read once, {k.env_read}); one "
                       f"you set yourself is kept")
        elif k.probe is not None:
            by = "the loader probes" if k.probe == "input" else "compute-ceiling probes"
            extra = " (image workloads: not probed for models without 2-D convolutions)" \
                if name == "channels_last" else ""
            out.append(f"{name}: kept, decided by {by} at the study's batch sizes{extra}")
        elif k.needs:
            out.append(f"{name}: kept ({k.needs_text})")
    return out


def _complete(o: Objective, key: str) -> Objective:
    """An objective with its direction: `quality` stays open (the workload decides), a known metric may omit its
    direction, any other name (a metric the workload's evaluate returns) must give one."""
    if o.metric == QUALITY:
        if o.direction is not None:
            raise ConfigError(f"{key}: 'quality' takes its direction from the workload; drop direction")
        return o
    known = BY_KEY.get(o.metric)
    if known is not None and known.direction is None:
        raise ConfigError(f"{key}.metric: {o.metric!r} is not something to optimize; use throughput, a cost such as "
                          f"peak_mem_mb, quality, or a metric your workload's evaluate returns")
    if o.direction is None:
        if known is None:
            raise ConfigError(f"{key}: give a direction (max or min) for {o.metric!r}")
        return Objective(metric=o.metric, direction=known.direction)
    return o
