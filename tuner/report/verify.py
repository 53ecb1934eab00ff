"""`tuner export --verify`: re-run an exported config as `tuner train` would, beside the study's baseline re-run
interleaved with it, and judge the re-runs against the figure (or the ratio to the baseline) the study recorded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.config import TrialConfig
from tuner.errors import RunFailed, StudyError
from tuner.analysis import Interval, Study, pool, ratio_interval
from tuner.report.settings import run_env, trial_config
from tuner.study import TrialRecord


class VerifyFailed(RunFailed):
    """The rerun of an exported config did not complete, or re-measured away from the recorded figure: exit 3, as
    `tuner train` exits for a failed run."""


@dataclass
class Verification:
    """R re-runs of an exported config against the figure the study recorded for it; beside the baseline's config
    re-run interleaved with it, where the study has a baseline, judged as a ratio to it."""

    states: list[str]
    errors: list[str]
    values: list[float]  # throughput of each complete re-run
    recorded: float | None  # the confirmed centre if the study confirmed the trial, else its one reading
    # geometric mean of the re-runs and where a figure of the recorded one's runs should read beside it (95%,
    # two-sample: the recorded figure has noise of its own; see verify)
    measured: Interval | None
    baseline: int | None = None  # the baseline trial re-measured beside the config (None: none was)
    baseline_values: list[float] | None = None  # the baseline's re-runs, interleaved with the config's
    recorded_ratio: float | None = None  # the config over the baseline as the study read them, side by side
    # the re-runs' ratio (geometric means) and where the recorded ratio should lie beside it (95%, both sides' noise)
    measured_ratio: Interval | None = None
    baseline_recorded: float | None = None  # the baseline's figure in the study (its drift: baseline_values' mean)
    environments: list[Any] = field(default_factory=list)  # each re-run's (RunEnvironment: others' share of its CPUs)

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.recorded:
            return None
        return self.measured.centre / self.recorded

    @property
    def drift(self) -> float | None:
        """How fast the machine reads now against the study, from the baseline: its re-runs over its figure."""
        if not self.baseline_values or not self.baseline_recorded:
            return None
        now = ratio_interval(self.baseline_values, [self.baseline_recorded], None)
        return now.centre if now is not None else None

    @property
    def complete(self) -> bool:
        ok = ("complete", "not reached")  # measured in full
        return bool(self.values) and all(s in ok for s in self.states) \
            and (self.baseline is None or bool(self.baseline_values))

    @property
    def agrees(self) -> bool | None:
        """Whether the recorded figure lies inside the re-measured interval (None: no interval to judge by): a
        two-sample test at 5%, so a config that did not change fails 1 time in 20. With the baseline re-measured
        beside it, the ratio to the baseline is judged, so the machine's drift between the study and now (which
        failed an unchanged config 11% of the time at 5% drift, 27% at 10%) moves both sides alike."""
        if self.measured_ratio is not None:
            if self.recorded_ratio is None or self.measured_ratio.low is None:
                return None
            return self.measured_ratio.contains(self.recorded_ratio)
        if self.measured is None or self.recorded is None or self.measured.low is None:
            return None
        return self.measured.contains(self.recorded)


@dataclass(frozen=True)
class Beside:
    """The baseline an exported config is verified beside: its config and what the study read of each, side by
    side (`Study.value`: each as read beside the baseline in the same phase), with the runs behind each figure."""

    trial: int
    config: TrialConfig
    recorded: float  # the baseline's figure in the study
    ratio: float  # the exported config's figure over the baseline's, as the study read them side by side
    runs: int  # the baseline's runs behind its figure


def baseline_beside(study: Study, record: TrialRecord) -> Beside | None:
    """The study's baseline, to re-measure beside `record`'s config (None: the study has none, it is `record`
    itself, or a figure is missing)."""
    number = study.baseline_trial
    if number is None or number == record.trial:
        return None
    base = next((r for r in study.records if r.trial == number and r.complete), None)
    if base is None:
        return None
    mine, theirs = study.value(record, "throughput"), study.value(base, "throughput")
    if not mine or not theirs or mine <= 0 or theirs <= 0:
        return None
    try:
        cfg = trial_config(study, base)
    except StudyError:  # its config was not recorded: verified alone, as a study without a baseline
        return None
    cfg.env = run_env(cfg, base.environment) or None
    fig = base.confirmed.figures.get("throughput") if base.confirmed is not None else None
    if fig is not None and record.confirmed is not None:
        runs = len(base.confirmed.beside(record.confirmed, "throughput")) or len(fig.values)
    else:
        runs = len(fig.values) if fig is not None and record.confirmed is not None else 1
    return Beside(number, cfg, theirs, mine / theirs, max(runs, 1))


def verify(cfg: TrialConfig, recorded: float | None, reports_dir: Path, repeats: int = 3,
           study: Study | None = None, run: Callable[..., Any] | None = None,
           recorded_runs: int = 1, beside: Beside | None = None) -> Verification:
    """Rerun the exported config `repeats` times as `tuner train` would, and put an interval around their mean
    where the recorded figure (the mean of `recorded_runs` runs: its confirmed re-runs, or its one reading) should
    lie: both figures are noisy, so the interval counts both (sd x sqrt(1/repeats + 1/recorded_runs)); an interval
    for the re-runs' mean alone failed an unchanged config 15-21% of the time instead of 5%. The spread is these
    re-runs', pooled with the study's own re-runs when it has some (more degrees of freedom).

    `beside`: the study's baseline, re-run as often, interleaved (config, baseline, baseline, config, ...: a steady
    drift moves both alike), and the ratio of the two judged against the ratio the study read
    (sd x sqrt(1/repeats + 1/repeats + 1/recorded_runs + 1/beside.runs)): the machine drifts between sessions, and
    judged alone an unchanged config failed 11% of the time at 5% drift, 27% at 10%."""
    servers = None
    if run is None:
        from tuner.search import Servers

        servers = Servers()  # this check's own fork servers, one per environment, ended with it
        run = apart(servers)
    try:
        return _verify(cfg, recorded, reports_dir, repeats, study, recorded_runs, beside, run)
    finally:
        if servers is not None:
            servers.close()


def apart(servers: Any) -> Callable[..., Any]:
    """A re-run in a process of its own each (tuner.search.run_apart), under its config's environment, as the
    study's trials and re-runs ran: in one process the runs after the first inherited what the ones before had
    allocated (glibc's malloc keeps its raised thresholds: 10-15% faster on the DCGAN fp32, issue 58), and only
    the first run's environment could be set before torch loaded."""
    from tuner.report.settings import run_own_process
    from tuner.study import TrialResult

    def run(cfg: TrialConfig, cache_dir: Path) -> TrialResult:
        payload, why = run_own_process(verify_run, cfg, cache_dir, servers)
        return TrialResult.model_validate(payload) if payload is not None else TrialResult(state="error", error=why)

    return run


def verify_run(cfg_json: str, cache_dir: str) -> dict[str, Any]:
    """In the re-run's own process: the pre-flight (its one-time costs, outside the timed training), then the run,
    as `tuner train` runs a config; its result as JSON (a refused config: a run that ended `error`, its line)."""
    import json

    from tuner.config import parse_config
    from tuner.errors import UserError
    from tuner.study import TrialResult
    from tuner.train import preflight, run_trial

    cfg = parse_config(json.loads(cfg_json), "a verify run")
    try:
        preflight(cfg, Path(cache_dir))
    except UserError as err:
        return TrialResult(state="error", error=str(err)).model_dump(mode="json")
    return run_trial(cfg, cache_dir=Path(cache_dir)).model_dump(mode="json")


def _verify(cfg: TrialConfig, recorded: float | None, reports_dir: Path, repeats: int, study: Study | None,
            recorded_runs: int, beside: Beside | None, run: Callable[..., Any]) -> Verification:
    states, errors, values, base_values, environments = [], [], [], [], []
    order = [(cfg, values)] if beside is None else [(cfg, values), (beside.config, base_values)]
    for i in range(repeats):
        for config, into in (order if i % 2 == 0 else order[::-1]):
            result = run(config, cache_dir=Path(reports_dir) / ".cache")
            states.append(result.state)
            environments.append(getattr(result, "environment", None))
            if result.error:
                errors.append(result.error)
            if result.complete and result.throughput:  # a re-run short of the study's target still measured its speed
                into.append(float(result.throughput))
    measured = measured_ratio = None
    groups = [values] + ([base_values] if beside is not None else [])
    if study is not None:
        groups += study.noise_groups("throughput")
    pooled = pool(groups) if values else None
    if values:
        measured = pooled.prediction(values, runs=recorded_runs) if pooled is not None \
            else Interval(values[0], None, None)
    if beside is not None and values and base_values:
        measured_ratio = ratio_interval(values, base_values, pooled, against=(recorded_runs, beside.runs))
    return Verification(states, errors, values, recorded, measured,
                        baseline=beside.trial if beside is not None else None,
                        baseline_values=base_values if beside is not None else None,
                        recorded_ratio=beside.ratio if beside is not None else None, measured_ratio=measured_ratio,
                        baseline_recorded=beside.recorded if beside is not None else None,
                        environments=environments)
