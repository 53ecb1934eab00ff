"""The compute-side knobs by compute-ceiling probes (tuner.search._probe runs them): channels_last, cudnn_benchmark,
optimizer_impl and threads (tuner.knobs: `probe="compute"`), and the numerics knobs (precision, TF32) the study's
parity check found within seed noise (within_noise).

The compute-side speed knobs change how fast the model computes, never what it learns, so at each probed batch size
the compute ceiling is read with tuner's defaults, then with each other value of each knob alone, then with the
defaults again (drift between the readings then counts against the alternatives); a setting read within 10% of the
defaults (tuner.train.probe.CLOSE: one reading's noise on a shared machine) is read again, in reverse order, with the
defaults once more, and each keeps its best reading (probes.json keeps every reading and their spread: on a busy
machine one reading per setting decided by a moment's load, issue 52 item 5); a value is kept only where its
reading beats the better default reading by more than SPEED_GAIN, each knob on its own (the readings of two knobs
together are not measured: their gains are assumed to combine). channels_last is not probed where the models
have no 4-D weight (no 2-D convolution): the inputs alone in NHWC would only add a copy.

Numerics knobs (precision, TF32; not compile, whose compile time does not fit a probe) join the compute-side
candidates once the parity check, run before the probes, found every value the study may pick within seed noise:
the rounding then changes nothing a change of seed would not, so only speed is in question, and the same rule
(SPEED_GAIN over the defaults' reading) decides. A knob with a value that drifts or diverged stays with the trials,
whose quality decides it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.knobs import KNOBS, acts, env_knobs, parity_probed, probed
from tuner.space import Space
from tuner.study import ProbeChoice, SpeedProbe

if TYPE_CHECKING:
    from tuner.study import StudyParity

# tuner.knobs: channels_last, cudnn_benchmark, optimizer_impl, threads; not those set through the environment
# before torch loads (the OpenMP wait policy), which fresh processes read (tuner.search._env_probe)
SPEED_KNOBS = tuple(k for k in probed("compute") if k not in env_knobs())
SPEED_GAIN = 0.05  # a speed knob's value is kept only where it beats the defaults' compute ceiling by 5%
# Why channels_last was not probed at a batch size: the models have no 4-D weight (an MLP, a transformer), so NHWC
# would change nothing but a copy of 4-D inputs; given_back leaves it at its default rather than to the trials.
NO_4D_WEIGHTS = "channels_last: not probed, the models have no 4-D weights"


def within_noise(parity: "StudyParity | None") -> dict[str, list[Any]]:
    """The numerics knobs the probes may decide (tuner.knobs.parity_probed: precision, TF32), each with its values
    other than fp32's, where the study's parity check found every one of them within seed noise: a change of
    rounding nobody could tell from a change of seed, so only its speed is in question. A knob with a value that
    drifts or diverged stays with the trials (their quality decides it), as does one with a value the check did not
    run for (too slow for its cap) and every knob of a failed check."""
    if parity is None or parity.error:
        return {}
    values: dict[str, list[Any]] = {}
    drifts: set[str] = {name for knobs in parity.unchecked for name in knobs}  # a value not checked: the trials'
    for v in parity.verdicts:
        for name, value in v.knobs.items():
            if name not in parity_probed():
                continue
            if v.state != "within seed noise":
                drifts.add(name)
            elif value not in values.setdefault(name, []):
                values[name].append(value)
    return {name: vs for name, vs in values.items() if name not in drifts}


def candidate_speeds(space: Space, knobs: list[str], numerics: dict[str, list[Any]] | None = None,
                     ) -> list[dict[str, Any]]:
    """Compute-side settings to probe: {} (tuner's defaults), then each other value of each speed knob alone, then
    each value of each numerics knob in `numerics` (within_noise) alone."""
    from tuner.config import Params

    defaults = Params()
    out: list[dict[str, Any]] = [{}]
    for name in SPEED_KNOBS:
        spec = space.params.get(name)
        if name not in knobs or spec is None:
            continue
        out += [{name: v} for v in _values(spec) if v != getattr(defaults, name)]
    for name, values in (numerics or {}).items():
        if name in knobs:
            out += [{name: v} for v in values if v != getattr(defaults, name)]
    return out


def _values(spec: Any) -> list[Any]:
    """A speed knob's values to probe: both of a bool, every choice, and of an int range (the thread count) its
    powers of two below its top (the top is the trial's CPUs: torch's default there, the defaults' reading)."""
    if spec.type == "bool":
        return [False, True]
    if spec.type == "int":
        lo, hi = int(spec.low), int(spec.high)
        return sorted({n for n in (1, 2, 4, 8, 16, 32, 64, 128) if lo <= n < hi} | ({lo} if lo < hi else set()))
    return list(spec.choices or [])


def choose_speed(baseline: float | None, probes: list[SpeedProbe]) -> tuple[dict[str, Any], float | None]:
    """Per knob, the value whose compute ceiling beats `baseline` (the defaults') by more than SPEED_GAIN, if any
    does (the fastest of those); and the compute ceiling the choice is expected to reach (its best reading)."""
    chosen: dict[str, Any] = {}
    best: dict[str, float] = {}
    for p in probes:
        if not p.knobs or p.compute_ceiling is None or baseline is None:
            continue
        (name, value), = p.knobs.items()
        if p.compute_ceiling > (1 + SPEED_GAIN) * baseline and p.compute_ceiling > best.get(name, 0.0):
            chosen[name], best[name] = value, p.compute_ceiling
    for name in [n for n in chosen if not acts(n, chosen)]:  # TF32 beside a chosen bf16: nothing left to change
        chosen.pop(name)
        best.pop(name)
    return chosen, max(best.values(), default=baseline)


def given_back(knobs: list[str], choices: list[ProbeChoice]) -> list[str]:
    """The compute-side knobs (speed, and numerics parity passed) the probes could not decide: no batch size gave
    a compute reading (every step too slow for one: a ResNet-18 at 64x64 on 2 CPUs, 0.4 s a step, against a 15 s
    budget's 0.75 s). Kept by the probes, they would stay at their defaults untried; the trials measure them."""
    if any(c.compute_ceiling is not None for c in choices):
        return []
    no_effect = {"channels_last"} if any(NO_4D_WEIGHTS in c.notes for c in choices) else set()
    # channels_last on models with no 4-D weight changes nothing the trials could measure: kept at its default
    return [k for k in knobs if KNOBS[k].probe == "compute" and not KNOBS[k].env and k not in no_effect]
