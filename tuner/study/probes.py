"""What a study's probes found, as the study folder keeps it (probes.json): the input ceiling of each probed
loader, the compute ceiling of each probed setting of the compute-side speed knobs (channels_last, cudnn_benchmark,
optimizer_impl, and a precision or TF32 the parity check passed), what was chosen at each probed batch size, and
the split of the effective batch where the probes chose it (tuner.search._probe runs them).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field, model_validator


class LoaderProbe(BaseModel):
    """The input ceiling of one loader at a batch size, and what a trial with it is predicted to reach."""

    loader: dict[str, Any]
    input_ceiling: float | None = None  # the best of its readings
    predicted: float | None = None
    # Each reading, in the order read: more than one where a rival loader was predicted within CLOSE of it (issue 52
    # item 5); empty in probes.json written before.
    readings: list[float | None] = Field(default_factory=list)


class SpeedProbe(BaseModel):
    """The compute ceiling with one setting of the compute-side speed knobs ({} : their defaults)."""

    knobs: dict[str, Any]
    compute_ceiling: float | None = None  # the best of its readings
    readings: list[float | None] = Field(default_factory=list)  # each reading, in the order read (issue 52 item 5)

    @property
    def spread(self) -> float | None:
        """(max - min) / max of its readings, where it was read more than once: the probe's own noise."""
        read = [v for v in self.readings if v]
        return round((max(read) - min(read)) / max(read), 4) if len(read) > 1 else None


class ProbeChoice(BaseModel):
    """The probes at one batch size and the loader and speed knobs chosen there."""

    batch_size: int
    compute_ceiling: float | None = None  # with the chosen speed knobs (the best reading of those probed)
    probes: list[LoaderProbe] = Field(default_factory=list)
    loader: dict[str, Any] = Field(default_factory=dict)
    speed_probes: list[SpeedProbe] = Field(default_factory=list)
    speed: dict[str, Any] = Field(default_factory=dict)  # the compute-side speed knobs chosen (defaults left out)
    notes: list[str] = Field(default_factory=list)  # why a knob was not probed here ("channels_last: no 4-D inputs")
    # The pre-flight's step at this batch size, where it was too slow for a probe reading: nothing was set up here.
    preflight_step_s: float | None = None
    # The workload's error where the compute reading raised here (`ValueError: ... (at model.py:12)`): a bug at
    # this batch size, which the study says at its start rather than leaving a split it then never runs.
    raised: str | None = None
    # The compute readings with the chosen speed knobs where this micro-batch and a rival split were read again
    # before the split was chosen (issue 52 item 5): the first is the probes' own; empty where not read again.
    readings: list[float | None] = Field(default_factory=list)
    # The compute readings' deadline here at the end: the probes' own, or a longer one fitted to the step of a
    # reading it cut (tuner.train.probe_ceilings); the environment probes read this batch size with it too.
    reading_seconds: float | None = None

    def knobs(self) -> dict[str, Any]:
        """Everything chosen here: the loader and the speed knobs."""
        return {**self.loader, **self.speed}

    def speedups(self) -> list[str]:
        """Each probed speed setting against the defaults, `channels_last True x1.12`."""
        base = next((p.compute_ceiling for p in self.speed_probes if not p.knobs), None)
        out = []
        for p in self.speed_probes:
            if p.knobs and base and p.compute_ceiling:
                again = f" (best of {len(p.readings)}, spread {p.spread:.0%})" if p.spread is not None else ""
                out.append(", ".join(f"{k} {v}" for k, v in p.knobs.items()) + f" x{p.compute_ceiling / base:.2f}"
                           + again)
        return out


class EnvProbe(BaseModel):
    """A knob applied through the environment (the OpenMP wait policy, glibc's malloc), each value read in fresh
    processes at one config (the baseline's batch with the speed knobs chosen there), interleaved: `readings` per
    value in the order read, `chosen` what every trial but the baseline runs under ({}: the user's environment, nothing set)."""

    knob: str
    batch_size: int
    readings: dict[str, list[float | None]] = Field(default_factory=dict)
    chosen: dict[str, Any] = Field(default_factory=dict)
    why: str = ""  # the figure that chose it: `ACTIVE 1742 vs default 1311 samples/s (x1.33)`
    seconds: float = 0.0

    def best(self, value: str) -> float | None:
        """A value's reading: the best of its readings (a moment's load only ever slows one)."""
        read = [v for v in self.readings.get(value, []) if v]
        return max(read) if read else None


class ProbePlan(BaseModel):
    """What the probes found (probes.json in the study folder): the knobs they decide (loader and compute-side
    speed knobs, numerics knobs parity passed), per batch size, and an exact split of the effective batch."""

    knobs: list[str]
    choices: list[ProbeChoice]
    seconds: float = 0.0  # wall time of the probe phase
    device: str = ""
    # The split of the kept effective batch the probes chose (batch_size, accumulation_steps), where it is exact
    # (no batch statistics); None: the trials search it (or the space does not split).
    split: dict[str, int] | None = None
    # Compute-side knobs no batch size gave a reading for (steps too slow for one): the trials search them.
    unread: list[str] = Field(default_factory=list)
    # The environment knobs, each read in fresh processes, in the order probed (tuner.search._env_probe).
    environments: list[EnvProbe] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _one_environment(cls, data: Any) -> Any:
        """A probes.json from before malloc was a knob held its one probe (the wait policy's) as `environment`."""
        if isinstance(data, dict) and "environment" in data:
            data = dict(data)
            one = data.pop("environment")
            data.setdefault("environments", [one] if one else [])
        return data

    def env_probe(self, knob: str) -> EnvProbe | None:
        """The environment probe of `knob` (None: not probed)."""
        return next((p for p in self.environments if p.knob == knob), None)

    def loader_for(self, batch_size: int | None) -> dict[str, Any]:
        """The loader and speed knobs chosen at the probed batch size nearest `batch_size` (on a log scale); with
        a split the probes chose, that split and what was chosen at its micro-batch, whatever `batch_size`."""
        env = {k: v for p in self.environments for k, v in p.chosen.items()}
        if self.split is not None:
            batch_size = self.split["batch_size"]
            return {**self.split, **next((c.knobs() for c in self.choices if c.batch_size == batch_size), {}), **env}
        if not self.choices:
            return env
        if batch_size is None:
            return {**self.choices[0].knobs(), **env}
        best = min(self.choices, key=lambda c: abs(math.log(c.batch_size) - math.log(max(1, batch_size))))
        return {**best.knobs(), **env}

    def describe(self) -> str:
        if self.split is not None:  # every trial's: what was chosen at its micro-batch
            b, a = self.split["batch_size"], self.split["accumulation_steps"]
            knobs = ", ".join(f"{k} {v}" for k, v in self.loader_for(b).items() if k not in self.split)
            return f"split {b} x {a} (exact: no batch statistics): {knobs or 'defaults'}"
        parts = []
        for c in self.choices:
            knobs = ", ".join(f"{k} {v}" for k, v in c.knobs().items()) or "defaults"
            parts.append(f"batch {c.batch_size}: {knobs}")
        for probe in self.environments:
            parts.append(", ".join(f"{k} {v}" for k, v in probe.chosen.items()) or f"{probe.knob} default (yours)")
        return "; ".join(parts)
