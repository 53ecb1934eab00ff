"""Search spaces: YAML files that say which knobs a study searches, over which values, and what it scores.

A space file (see `search_spaces/*.yaml`):

    description: one line for `tuner spaces`
    defaults: {workload: gan, dataset: digits, budget: {seconds: 20}, trials: 12}
    objectives:
      gan: [{metric: throughput, direction: max}, {metric: fid, direction: min}]
      cnn: [{metric: throughput, direction: max}, {metric: loss, direction: min}]
    params:                       # names are `tuner.config.Params` fields, sampled in this order
      batch_size: {type: int, low: 16, high: 256, log: true}
      beta1: {type: float, low: 0.0, high: 0.9}
      precision: {type: categorical, choices: [fp32, bf16, fp16]}
      pin_memory: {type: bool, when: {gpus: ">0"}}
      prefetch_factor: {type: int, low: 1, high: 8, when: {num_workers: ">0"}}
      lr: {value: 0.0002}         # fixed (a bare scalar works too: `lr: 0.0002`)
    trial: {quality: {fid_samples: 500}}   # optional: fixed TrialConfig settings (measure, quality, image_size)

`when` makes a param conditional: it is sampled only when every condition holds, and otherwise keeps its
`Params` default (so prefetch_factor is never proposed with num_workers 0, which the config refuses). A
condition names an earlier param or a fact about the trial (CONTEXT_NAMES: `gpus`, the trial's GPU count; `cpus`,
the CPUs of one training process; `tf32_available`, whether its GPU has TF32 tensor cores) and is a value
(equality), a list (one of), or a string with an operator: ">0", ">=2", "<4", "<=8", "==fp16", "!=fp32".

Resources in bounds: `low` and `high` may be expressions over the trial's resources (`high: cpus`,
`high: cpus - 1`, `low: 2 * gpus`, `high: "min(cpus, 16)"`; see tuner.space._expr). They are resolved once per study,
when its resources are known (`Space.resolve`): an int bound is rounded down, and a value beyond the param's own
limit in `tuner.config.Params` is clamped to it (num_workers at most 128). A domain that comes out empty for the
study's trials (low > high) is refused before any trial runs.

Native choices: `precision: {type: categorical, choices: [fp32, bf16, fp16], native: true}` keeps only the
choices the trial's device runs natively (the context's `precisions`, from `tuner.device`): on a CPU fp32, and
bf16 where the CPU has native bf16 (AVX512-BF16 / AMX-BF16, Arm's BF16), so the study spends no trial on emulated
half precision; without `native` every listed choice is searched. A
categorical left with one choice is a fixed value (Optuna samples nothing for it).

The schema's parts live apart, one job each: a param's domain and its resolution for a study's resources in
tuner.space._param, `when:` conditions in tuner.space._condition, finding a space file on disk and parsing it in
tuner.space._load, and expressions in tuner.space._expr.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from tuner.config import Budget, Params, TrialConfig, parse_config
from tuner.errors import ConfigError
from tuner.knobs import KNOBS, heavy_knobs
from tuner.space._condition import CONTEXT_NAMES, _Strict
from tuner.space._param import ParamSpec
from tuner.study import Objective, QUALITY

SPACE_SUFFIXES = (".yaml", ".yml")
DEFAULT_OBJECTIVES = "default"  # the key a plain list of objectives is stored under: every workload


def spaces_dir() -> Path:
    """The bundled spaces: the package folder `tuner/spaces`, which in a source checkout (and an editable install)
    is a link to `search_spaces/` at the top of the repository and in a wheel or sdist holds the files themselves.
    Resolved, so a checkout names `search_spaces/`; that folder itself where the link is missing (a checkout on a
    file system without symbolic links)."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "spaces"
    if packaged.is_dir():
        return packaged.resolve()
    return package.parent / "search_spaces"


class SpaceDefaults(_Strict):
    workload: str = "gan"
    workload_options: dict[str, Any] = Field(default_factory=dict)
    dataset: str | None = None  # applies with the default workload only (another workload brings its own data)
    budget: Budget = Field(default_factory=lambda: Budget(seconds=20))
    trials: int = Field(12, gt=0, le=100000)
    # Trial 0 of a new study runs tuner's default knobs (Params defaults, where the space allows them): the
    # reference every other trial is compared against, and a known-sane point for the sampler to start from.
    baseline: bool = True


class Space(_Strict):
    """A parsed, validated search space. `name` is the file's stem; `source` the file it came from."""

    name: str = ""
    source: str = ""
    description: str = ""
    defaults: SpaceDefaults = Field(default_factory=SpaceDefaults)
    objectives: dict[str, list[Objective]]
    params: dict[str, ParamSpec]
    trial: dict[str, Any] = Field(default_factory=dict)
    # Time to a target quality (issue 34): a value of the study's quality metric, in its direction (--target too).
    target: float | Literal["baseline"] | None = None  # baseline: set by its training; finite (tuner.target)
    # An explicit effective batch to search (issue 40; tuner.space._batch): without it the workload's own is kept.
    effective_batch: ParamSpec | None = None

    @field_validator("effective_batch", mode="before")
    @classmethod
    def _bare_effective_batch_is_fixed(cls, v: Any) -> Any:
        return v if v is None or isinstance(v, dict) else {"value": v}

    @field_validator("params", mode="before")
    @classmethod
    def _bare_scalars_are_fixed(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (p if isinstance(p, dict) else {"value": p}) for k, p in v.items()}
        return v

    @field_validator("objectives", mode="before")
    @classmethod
    def _list_means_every_workload(cls, v: Any) -> Any:
        v = {DEFAULT_OBJECTIVES: v} if isinstance(v, list) else v
        if isinstance(v, dict):  # a bare metric name (`objectives: [time_to_target]`): Objective.of's direction
            v = {k: [bare_objective(o) for o in objs] if isinstance(objs, list) else objs for k, objs in v.items()}
        return v

    @property
    def searched(self) -> list[str]:
        """Names of the params the sampler draws, in space order."""
        return [k for k, p in self.params.items() if not p.fixed]

    @property
    def bundled(self) -> bool:
        """Whether this space is one that ships with tuner (its file in `spaces_dir()`) rather than the user's own:
        tuner adapts a bundled space to the workload (its betas, _fit_optimizer) but never a file its user wrote."""
        return bool(self.source) and Path(self.source).resolve().parent == spaces_dir()

    def without(self, names: list[str] | tuple[str, ...]) -> "Space":
        """This space with the params `names` left out (a bundled space's betas for an optimizer without them)."""
        return self.model_copy(update={"params": {k: p for k, p in self.params.items() if k not in names}})

    def objectives_for(self, workload: str, quality: Objective | None = None) -> list[Objective]:
        """The objectives for `workload` (its own entry, else the space's list for every workload), with
        `metric: quality` replaced by the workload's declared quality objective."""
        objs = self.objectives.get(workload) or self.objectives.get(DEFAULT_OBJECTIVES)
        if not objs:
            have = ", ".join(self.objectives) or "none"
            raise ConfigError(f"{self.source}: objectives: no objectives for workload {workload} (has: {have}); "
                              f"give a list of objectives for every workload, or add objectives.{workload}")
        out = []
        for o in objs:
            if o.metric == QUALITY:
                if quality is None:
                    raise ConfigError(f"{self.source}: objectives: 'quality' stands for the workload's quality "
                                      f"objective, but workload {workload} declares none (Workload.quality); name a "
                                      f"metric instead")
                o = quality
            out.append(o)
        if len({o.metric for o in out}) != len(out):
            raise ConfigError(f"{self.source}: objectives: {workload}'s quality objective is already listed; list it "
                              f"once")
        return out

    def definition(self) -> dict[str, Any]:
        """The space as plain data (what study.json stores and `--resume` compares)."""
        d = self.model_dump(mode="json", exclude={"name", "source"} | ({"target"} if self.target is None else set())
                            | ({"effective_batch"} if self.effective_batch is None else set()))
        if self.effective_batch is not None:
            d["effective_batch"] = self.effective_batch.model_dump(mode="json", exclude_none=True,
                                                                   exclude_defaults=True)
        for k, p in self.params.items():
            d["params"][k] = {kk: vv for kk, vv in d["params"][k].items() if vv is not None and vv is not False}
            if p.fixed:
                d["params"][k]["value"] = p.model_dump(mode="json")["value"]
        return d

    @property
    def unresolved(self) -> bool:
        """Whether some domain depends on the trial's resources or device (see `resolve`)."""
        return any(p.unresolved for p in self.params.values())

    def resolve(self, context: dict[str, Any], *, strict: bool = True) -> "Space":
        """This space for one study's trials: every domain resolved for the context (`cpus`, `gpus`, `precisions`,
        `device`; see ParamSpec.resolve). `strict`: a domain left empty, or a space left with nothing to search
        (every searched param down to one value), is a ConfigError naming the file and the param."""
        if not self.unresolved:
            return self
        params = {name: spec.resolve(name, context, source=self.source or "space", strict=strict)
                  for name, spec in self.params.items()}
        resolved = self.model_copy(update={"params": params})
        if strict and all(params[n].single for n in resolved.searched):
            collapsed = ", ".join(f"{n} = {params[n].choices[0] if params[n].choices else params[n].low}"
                                  for n in resolved.searched if self.params[n].unresolved)
            where = context.get("device") or "this machine"
            raise ConfigError(f"{self.source}: params: nothing left to search on {where} ({collapsed}); search "
                              f"another param, or drop native: true to search the listed choices anyway")
        return resolved

    def reachable(self, context: dict[str, Any]) -> list[str]:
        """The searched params a study with this context can sample at all: those whose conditions on the context
        hold (a CPU study never samples pin_memory or tf32, so its reports need no column for them)."""
        return [n for n in self.searched
                if all(c.holds(context.get(c.name)) for c in self.params[n].conditions() if c.name in CONTEXT_NAMES)]

    def sample(self, trial: Any, context: dict[str, Any], skip: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
        """Define-by-run: draw the searched params in order, skipping those whose conditions fail and those in
        `skip` (decided elsewhere: the loader knobs a study probed). A space that depends on the trial is resolved
        for `context` first (a study passes it resolved once)."""
        if self.unresolved:
            return self.resolve(context).sample(trial, context, skip)
        from tuner.space._batch import sample_split, splits

        split = splits(self)
        drawn: dict[str, Any] = {}
        for name, spec in self.params.items():
            if split and name in heavy_knobs():  # one effective batch, split (_batch.py), unless decided elsewhere
                if "batch_size" not in drawn and "batch_size" not in skip:
                    drawn.update(sample_split(self, trial))
                continue
            if spec.fixed or name in skip:
                continue
            known = {**context, **self.fixed_values(), **drawn}
            if all(c.holds(known.get(c.name, getattr(Params(), c.name, None))) for c in spec.conditions()):
                drawn[name] = spec.suggest(trial, name)
        return drawn

    def baseline_point(self, context: dict[str, Any], own: dict[str, Any] | None = None) -> dict[str, Any]:
        """tuner's default knobs as a point of this space: each searched param at its Params default when the
        domain contains it (others are left to the sampler), conditionals as sample() would treat them. A param
        whose default is the workload's own (lr, beta1, beta2; lr_scale 1) takes it from `own`."""
        own = {"lr_scale": 1.0, **(own or {})}
        if self.unresolved:
            return self.resolve(context).baseline_point(context, own)
        defaults = Params()
        point: dict[str, Any] = {}
        for name, spec in self.params.items():
            if spec.fixed:
                continue
            known = {**context, **self.fixed_values(), **point}
            if not all(c.holds(known.get(c.name, getattr(defaults, c.name, None))) for c in spec.conditions()):
                continue
            value = getattr(defaults, name)
            if value is None:
                value = own.get(name)
            if value is None and name in KNOBS and KNOBS[name].default_from:  # torch's threads: the trial's CPUs
                value = context.get(str(KNOBS[name].default_from))
            if spec.contains(value):
                point[name] = value
        from tuner.space._batch import baseline_split, own_batch, splits

        if splits(self):  # the baseline's own split of its own effective batch (_batch.py), or the sampler's draw
            point = {k: v for k, v in point.items() if k not in heavy_knobs()}
            point.update(baseline_split(self, own_batch(self)[0]))
        return point

    def with_own_batch(self, batch: int | None) -> tuple["Space", str | None]:
        """This space for a workload that trains at `batch` (Workload.batch_size): its baseline trains at it and a
        split divides it (the batch goes into `trial.params`, which study.json keeps), unless the space fixes the
        batch itself (batch_size, accumulation_steps or effective_batch), which decides: then the line that says
        so. A batch no micro-batch of the space's domains divides is a ConfigError naming the fix."""
        from tuner.space._batch import check_batch, own_batch

        if batch is None:
            return self, None
        given = {**dict(self.trial.get("params") or {}), **self.fixed_values()}
        if "batch_size" in given or "accumulation_steps" in given or \
                (self.effective_batch is not None and self.effective_batch.fixed):
            b, a = own_batch(self)
            fixed = self.effective_batch is not None and self.effective_batch.fixed
            ran = int(self.effective_batch.value) if fixed else b * a  # type: ignore[union-attr]
            if ran == batch:
                return self, None
            what = f"effective_batch {ran}" if fixed else f"batch_size {b}" + (f" x {a} accumulation" if a > 1 else "")
            return self, (f"the workload trains at batch {batch}, but {self.source or 'the space'} fixes {what}: the "
                          f"baseline and the trials run the space's; drop it there to compare at yours")
        params = {**dict(self.trial.get("params") or {}), "batch_size": batch}
        adapted = self.model_copy(update={"trial": {**self.trial, "params": params}})
        check_batch(adapted, self.source or "space")
        return adapted, None

    def fixed_values(self) -> dict[str, Any]:
        return {k: p.value for k, p in self.params.items() if p.fixed}

    def trial_config(self, params: dict[str, Any], base: dict[str, Any], source: str = "trial") -> TrialConfig:
        """A full, validated TrialConfig: `base` (workload, dataset, budget, gpus...) + the space's `trial:` section
        + fixed params + the sampled `params`. Raises ConfigError naming `source` and the key."""
        data = {**self.trial, **base}
        merged_params = {**dict(self.trial.get("params") or {}), **dict(base.get("params") or {}),
                         **self.fixed_values(), **{k: v for k, v in params.items() if not k.startswith("_")}}
        data["params"] = merged_params
        return parse_config(data, source)


def bare_objective(raw: Any) -> Any:
    """A space's objective given as a bare metric name, as a mapping (throughput and accuracy maximized, others
    minimized; `quality` the workload's own, in its direction); anything else as it is."""
    if not isinstance(raw, str):
        return raw
    return {"metric": raw} if raw == QUALITY else Objective.of(raw).model_dump()


def check_finite(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
