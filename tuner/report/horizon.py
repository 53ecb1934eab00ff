"""`tuner export --horizon`: re-train the study's pick and its baseline to the user's own horizon and say whether
the study's speed-up holds there (issue 51, item 6). The figures and the word: tuner.analysis.horizon; the record:
tuner.study.horizon (horizon.json in the study folder).

Each run goes through what `tuner train` runs (tuner.train.preflight, run_trial), with the study's target's metric
and K but no value (a pending target: the run trains the whole horizon and keeps its quality curve), so the
horizon's target can be set after the runs and every run read against it. Each run trains in a process of its own,
as a study's trials and re-runs do (train_apart, through tuner.search.run_apart): in the CLI's process the runs
shared one process's allocator, thread pools and caches (re-runs sharing a process agreed within 1% while separate
processes of one config read 290-329 samples/s, benchmarks/results/retrain.md), and the pick's and the baseline's
environment (what their trials ran under: OMP_WAIT_POLICY, threads) could not both be set before torch loaded."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.config import HORIZON_SEEDS, Budget, Target, TrialConfig, check_horizon_longer, horizon_words
from tuner.config import parse_horizon  # noqa: F401 - --horizon's syntax, one for export and search (tuner.config)
from tuner.errors import ConfigError, StudyError
from tuner.analysis import (Study, horizon_ratio, horizon_target, horizon_text, judge, settled_quality, study_ratio,
                            to_target)
from tuner.study import HorizonCheck, HorizonRun, TrialRecord
from tuner.target import eval_step

DEFAULT_SEEDS = HORIZON_SEEDS


describe = horizon_words  # a horizon as the check says it (tuner.config, which search's --horizon shares)


@dataclass
class HorizonPlan:
    """What the check will run, decided before anything runs or is written."""

    pick: TrialRecord
    baseline: TrialRecord
    pick_config: TrialConfig
    baseline_config: TrialConfig
    horizon: Budget
    target: Target  # the study's metric, direction and K; value None (pending) for the runs
    given: float | None  # --target VALUE, or None: the baseline's quality at the horizon
    seeds: list[int]
    key: str  # what the ratio compares

    def runs(self) -> list[tuple[str, TrialConfig]]:
        """Interleaved: pick, baseline, pick, baseline ..., seed r on both sides of pair r."""
        out = []
        for seed in self.seeds:
            for side, cfg in (("pick", self.pick_config), ("baseline", self.baseline_config)):
                run = cfg.model_copy(deep=True)
                run.params.seed = seed
                run.budget = self.horizon
                run.target = self.target
                run.provenance = None
                out.append((side, run))
        return out

    def cost(self) -> str:
        """`6 runs x 2 min = 12 min of training, plus each run's evaluations every K samples and its setup`."""
        n = 2 * len(self.seeds)
        if self.horizon.samples is not None:
            total = f"{n * self.horizon.samples:,} samples"
        else:
            total = describe(Budget(seconds=n * (self.horizon.seconds or 0.0)))
        return (f"{n} runs ({len(self.seeds)} seeds each of the pick and the baseline, interleaved) x "
                f"{describe(self.horizon)} = {total} of training, each run in a process of its own, plus each run's setup "
                f"and its evaluations every "
                f"{self.target.eval_every_samples:,} samples")


def plan_horizon(study: Study, pick: TrialRecord, horizon: Budget, seeds: int = DEFAULT_SEEDS,
                 target: float | None = None) -> HorizonPlan:
    """The check for `pick`, or one clear StudyError/ConfigError: a study without a target (no quality metric to
    reach), without a baseline trial other than the pick, or a horizon no longer than the trials trained."""
    from tuner.report.settings import run_env, trial_config

    if seeds < 1:
        raise ConfigError(f"--horizon-seeds {seeds}: at least 1")
    t = study.target
    if t is None:
        raise StudyError(f"study '{study.name}' has no target (no quality metric reached every K samples): the "
                         f"horizon check reads time to a target; run a study with --target VALUE or --target "
                         f"baseline")
    if target is not None and not math.isfinite(target):
        raise ConfigError(f"--target {target}: give a finite value of {t.metric}")
    n = study.baseline_trial
    base = next((r for r in study.records if r.trial == n and r.complete), None) if n is not None else None
    if base is None:
        raise StudyError(f"study '{study.name}' has no complete baseline trial to re-train beside the pick")
    if base.trial == pick.trial:
        raise StudyError(f"the pick is the baseline (trial {base.trial}): there is no speed-up to check at a horizon; "
                         f"choose another with --trial")
    mine, theirs = trial_config(study, pick), trial_config(study, base)
    _longer(horizon, mine.budget, pick, study)
    for cfg, rec in ((mine, pick), (theirs, base)):
        cfg.env = run_env(cfg, rec.environment) or None
    key = next((o.metric for o in study.objectives if o.metric in ("time_to_target", "samples_to_target")),
               "time_to_target")
    pending = Target(metric=t.metric, direction=t.direction, value=None, eval_every_samples=t.eval_every_samples,
                     source="horizon")
    first = mine.params.seed + 1000  # seeds neither the trials nor their confirmation re-runs trained with
    return HorizonPlan(pick, base, mine, theirs, horizon, pending, target, [first + r for r in range(seeds)], key)


def _longer(horizon: Budget, trained: Budget, pick: TrialRecord, study: Study) -> None:
    """A horizon no longer than the trials' budget checks nothing the study did not read: refused
    (tuner.config.check_horizon_longer). Across units (a seconds horizon, a samples budget), the pick's own pace
    converts."""
    check_horizon_longer(horizon, trained, pick.throughput)


@dataclass(frozen=True)
class RunRead:
    """What one horizon run returns from its own process: plain data (its state, error, quality curve and the
    process it trained in)."""

    state: str
    error: str | None = None
    quality_curve: list[list[Any]] | None = None
    pid: int | None = None


def train_apart(cfg: TrialConfig, cache_dir: Path, servers: Any = None) -> RunRead:
    """One horizon run in a process of its own (tuner.search.run_apart: forked from a fork server that has imported
    only torch and tuner, under this side's environment; a fresh interpreter on a host with a GPU), under what its
    side's trial ran under (the config's env and what its knobs set, before torch loads there), as `tuner train`
    would run it. A process that dies before it reports is a run that ended `error`."""
    from tuner.report.settings import run_own_process

    payload, why = run_own_process(horizon_run, cfg, cache_dir, servers)
    return RunRead(**payload) if payload is not None else RunRead(state="error", error=why)


def horizon_run(cfg_json: str, cache_dir: str) -> dict[str, Any]:
    """In the run's own process: the pre-flight (its one-time costs, outside the timed training), then the run to
    the horizon, as `tuner train` runs a config; the ratio reads the quality curve, so no ceilings or noise scale
    (what a trial measures after training). Plain data back (RunRead's fields); a refused config is a run that
    ended `error`, its one line the error."""
    import os

    from tuner.config import parse_config
    from tuner.errors import UserError
    from tuner.train import preflight, run_trial

    cfg = parse_config(json.loads(cfg_json), "a horizon run")
    try:
        preflight(cfg, Path(cache_dir))
    except UserError as err:
        return {"state": "error", "error": str(err), "quality_curve": [], "pid": os.getpid()}
    result = run_trial(cfg, cache_dir=Path(cache_dir), measure_ceilings=False, measure_noise=False)
    return {"state": result.state, "error": result.error, "quality_curve": result.quality_curve or [],
            "pid": os.getpid()}


def run_horizon(plan: HorizonPlan, reports_dir: Path, study: Study,
                progress: Callable[[str], None] | None = None) -> HorizonCheck:
    """Run the plan's runs in its order, each in a process of its own (train_apart), and judge them
    (tuner.analysis.horizon). `progress`: one line as each run starts and as it ends."""
    from tuner.search import Servers

    servers = Servers()  # this check's own fork servers, one per environment, ended with it
    order = plan.runs()
    results: list[tuple[str, int, Any]] = []
    try:
        for i, (side, cfg) in enumerate(order, 1):
            if progress is not None:
                progress(f"horizon: run {i}/{len(order)}: the {side} (trial {_trial(plan, side)}), seed "
                         f"{cfg.params.seed}, {describe(plan.horizon)} ...")
            result = train_apart(cfg, Path(reports_dir) / ".cache", servers)
            results.append((side, cfg.params.seed, result))
            if progress is not None:
                q = settled_quality(result.quality_curve or [])
                ended = "trained to the horizon" if result.state in ("complete", "not reached") else \
                    f"ended {result.state}"  # a pending target is never reached: the run trains the whole horizon
                progress(f"horizon: run {i}/{len(order)} {ended}"
                         + (f", {plan.target.metric} {q:.4g} at the end" if q is not None else ""))
    finally:
        servers.close()
    return judge_runs(plan, study, results)


def _trial(plan: HorizonPlan, side: str) -> int:
    return plan.pick.trial if side == "pick" else plan.baseline.trial


def judge_runs(plan: HorizonPlan, study: Study, results: list[tuple[str, int, Any]]) -> HorizonCheck:
    """The check from the runs' quality curves: the target (given, or the baseline's at the horizon), each run's
    time to it, the ratio with its interval, the study's ratio, the word. A run that failed, or a side without a
    reading, is a RunFailed: no word stands on it."""
    from tuner.report.verify import VerifyFailed

    bad = [(side, r) for side, _, r in results if r.state not in ("complete", "not reached")]
    if bad:
        side, r = bad[0]
        raise VerifyFailed(f"horizon: a run of the {side} (trial {_trial(plan, side)}) ended {r.state}"
                           + (f": {r.error}" if r.error else "") + "; nothing recorded")
    if plan.given is not None:
        value, source = plan.given, "--target"
    else:
        value = horizon_target([r.quality_curve or [] for side, _, r in results if side == "baseline"])
        source = "baseline at the horizon"
        if value is None:
            raise VerifyFailed(f"horizon: the baseline's runs read no {plan.target.metric}: no target to set; "
                               f"nothing recorded")
    target = plan.target.model_copy(update={"value": value, "source": source})
    runs, values = [], {"pick": [], "baseline": []}  # type: dict[str, list[float]]
    missed = {"pick": 0, "baseline": 0}
    for side, seed, r in results:
        curve = r.quality_curve or []
        t, reached_t = to_target(curve, target, "time_to_target")
        n, _ = to_target(curve, target, "samples_to_target")
        v = t if plan.key == "time_to_target" else n
        if v is not None:
            values[side].append(v)
            missed[side] += 0 if reached_t else 1
        last = curve[-1] if curve else None
        runs.append(HorizonRun(side=side, seed=seed, state=r.state,
                               time_to_target=t if reached_t else None,
                               samples_to_target=int(n) if reached_t and n is not None else None,
                               trained_seconds=float(last[1]) if last else None,
                               trained_samples=int(last[0]) if last else None,
                               final_quality=settled_quality(curve), error=r.error,
                               pid=getattr(r, "pid", None)))
    if not values["pick"] or not values["baseline"]:
        raise VerifyFailed("horizon: a side's runs made no evaluation before the horizon (a horizon shorter than "
                           "one evaluation step?); nothing recorded")
    step = eval_step([r.quality_curve or [] for _, _, r in results], plan.key)
    ratio = horizon_ratio(values["pick"], values["baseline"], step)
    assert ratio is not None
    theirs = study_ratio(plan.pick, plan.baseline, plan.key)
    word = judge(ratio, theirs)
    op = "<=" if target.direction == "minimize" else ">="
    target_desc = f"{target.metric} {op} {value:.4g}" + (" (the baseline's at the horizon)" if plan.given is None
                                                          else "")
    text = horizon_text(word, ratio, theirs, plan.key, describe(plan.horizon), target_desc, len(plan.seeds), missed)
    return HorizonCheck(horizon=plan.horizon.model_dump(exclude_none=True), pick=plan.pick.trial,
                        baseline=plan.baseline.trial, metric=target.metric, direction=target.direction,
                        target=value, target_source=source, eval_every_samples=target.eval_every_samples,
                        key=plan.key, ratio=ratio.centre, low=ratio.low, high=ratio.high,
                        study_ratio=theirs.centre if theirs else None, study_low=theirs.low if theirs else None,
                        study_high=theirs.high if theirs else None, word=word, text=text, runs=runs,
                        checked_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
