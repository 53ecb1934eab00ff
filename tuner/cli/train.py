"""`tuner train`: run one configuration without Ray and print what it measured."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tuner.cli.app import (Debug, Format, FormatOption, app, apply_run_env, busy_line, note, print_json,
                           stdout_console, user_output)
from tuner.errors import RunFailed


@app.command()
def train(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config (the format `tuner export` writes).")],
    budget_seconds: Annotated[Optional[float], typer.Option(help="Override the budget: train this many seconds.")] = None,
    budget_samples: Annotated[Optional[int], typer.Option(help="Override the budget: train on this many samples.")] = None,
    fid_weights: Annotated[Optional[Path], typer.Option(help="Inception weights file (with quality.fid_features: inception).")] = None,
    reports_dir: Annotated[Path, typer.Option(help="Where caches (datasets, FID features) and outputs go.")] = Path("reports"),
    out_dir: Annotated[Optional[Path], typer.Option(help="Where to write the sample grid (gan). Default: <reports-dir>/train/.")] = None,
    until_target: Annotated[Optional[float], typer.Option(help="Train until the workload's quality metric meets "
                                                           "this value (its direction), or the budget ends; report "
                                                           "the time to it.")] = None,
    eval_every_samples: Annotated[Optional[int], typer.Option(help="With --until-target: evaluate every this many "
                                                                  "training samples (default: the config's target's, "
                                                                  "else 25 optimizer steps).")] = None,
    format: FormatOption = Format.table,
    debug: Debug = False,
) -> None:
    """Train one configuration and measure throughput (samples/s over the timed windows) and quality."""
    from tuner.config import budget_from_options, load_config

    from tuner.knobs import knob_env

    cfg = load_config(config)
    # The environment its trial ran under and what its knobs set (omp_wait_policy), before torch loads (libgomp
    # reads it once); nothing else: the run trains in the environment the user's own training runs in.
    apply_run_env({**(cfg.env or {}), **knob_env(cfg.params)})

    from tuner.files import check_writable
    from tuner.train import preflight, run_trial
    from tuner.train import check_budget, needed_budget

    chosen = "budget" in cfg.model_fields_set  # the config's own budget, or the default one (20 s)
    budget = budget_from_options(budget_seconds, budget_samples)
    if budget is not None:
        cfg.budget = budget
    if fid_weights is not None:
        cfg.quality.fid_weights = fid_weights
    as_json = format is Format.json
    out = out_dir or reports_dir / "train"
    check_writable(reports_dir, "--reports-dir")  # before the pre-flight check writes its caches
    if out_dir is not None:
        check_writable(out_dir, "--out-dir")
    with user_output():  # what the workload prints goes to stderr: stdout is the result
        device, check = preflight(cfg, reports_dir / ".cache")
        if until_target is not None or eval_every_samples is not None:
            cfg.target = until(cfg, check.quality, until_target, eval_every_samples)
        want = needed_budget(cfg, check.step_seconds, check.score_seconds, rounded=True)
        if want is not None and budget is None and not chosen:  # the default budget: sized to the model instead
            note(f"the default {cfg.budget.seconds:g} s budget is too short for workload {check.name}: one training "
                 f"step took {check.step_seconds:.3g} s in the pre-flight (batch {cfg.params.batch_size} on "
                 f"{device.describe()}); training {want:g} s instead (give --budget-seconds to choose)")
            cfg.budget = cfg.budget.model_copy(update={"seconds": want})
        check_budget(cfg, check.step_seconds, device.describe(), check.name,
                     check.score_seconds)  # before anything is written
        out.mkdir(parents=True, exist_ok=True)
        if not as_json:
            on = f" on {cfg.dataset}" if cfg.dataset else ""
            note(f"training {check.name}{on} for {cfg.budget.describe()} on {device.describe()} ...")
        eager = None
        if cfg.params.compile != "off" and check.step_seconds and check.step_samples:
            eager = check.step_samples / check.step_seconds  # the pre-flight's eager steps: the break-even's base
        result = run_trial(cfg, cache_dir=reports_dir / ".cache", out_dir=out, device=device,
                           wall_limit_s=wall_cap(cfg.budget, check.step_seconds, check.step_samples),
                           on_window=None if as_json else _print_window, eager_throughput=eager,
                           score_reserve_s=check.score_seconds,
                           preflight_pace_s=check.step_seconds / check.step_samples
                           if check.step_seconds and check.step_samples else None)
    if as_json:
        print_json(result.to_json())
    else:
        _print_summary(result, cfg.target)
    if (said := busy_line(result.environment)) is not None:
        note(said)
    if result.state not in ("complete", "not reached"):  # not reached: an answer (slower or worse), not a failure
        raise RunFailed(f"the run did not complete: {result.state} ({result.error})")


def until(cfg: Any, quality: Any, value: float | None, every: int | None) -> Any:
    """The run's target: the workload's quality metric and direction, `value` (else the config's target's), every
    `every` samples (else the config's, else 25 optimizer steps of the config: tuner.config.EVAL_EVERY_STEPS)."""
    import math

    from tuner.config import EVAL_EVERY_STEPS, Target
    from tuner.errors import ConfigError

    if quality is None or not cfg.quality.enabled:
        raise ConfigError("--until-target needs a quality to reach: the workload declares no quality metric or "
                          "the config has quality.enabled: false")
    if value is None and cfg.target is None:
        raise ConfigError("--eval-every-samples needs --until-target VALUE (or a target: in the config)")
    if value is not None and not math.isfinite(value):
        raise ConfigError(f"--until-target must be a finite number (got {value:g})")
    if every is not None and every < 1:
        raise ConfigError(f"--eval-every-samples must be >= 1 (got {every})")
    old = cfg.target
    return Target(metric=quality.metric, direction=quality.direction,
                  value=value if value is not None else old.value,
                  eval_every_samples=every or (old.eval_every_samples if old is not None else
                                               cfg.params.effective_batch * EVAL_EVERY_STEPS),
                  source="--until-target" if value is not None else old.source)


def wall_cap(budget: Any, step_seconds: float | None, step_samples: int | None) -> float | None:
    """The training loop's wall cap, as a search's trial gets it (tuner.search.toolkit.wall_limit): a seconds
    budget's 2x (at least +10 s); a samples budget's 5x the pre-flight's estimate (at least 30 s). A step that
    blocks past it and the time after it ends the run (issue 37: it hung `tuner train` before)."""
    if budget.seconds is not None:
        return max(2.0 * budget.seconds, budget.seconds + 10.0)
    if budget.samples is not None and step_seconds and step_samples:
        return max(30.0, 5.0 * budget.samples / step_samples * step_seconds)
    return None


def _print_window(w: dict[str, Any]) -> None:
    note(f"  window {w['window']}: {w['throughput']:.1f} samples/s, train loss {w['train_loss']:.4f}")


def _print_summary(result: Any, target: Any = None) -> None:
    """The result as a table; text from the run (errors, paths, metric names) is escaped, as rich reads `[...]`
    as markup (torch's "[enforce fail at alloc_cpu.cpp:127]" would vanish)."""
    from rich.markup import escape
    from rich.table import Table

    from tuner.study import fmt_metric, optimizer_text
    from tuner.study import METRICS

    t = Table(show_header=False, box=None)
    t.add_row("state", escape(result.state + (f" ({result.error})" if result.error else "")))
    spread = fmt_metric("throughput_spread", result.get("throughput_spread"))
    t.add_row("throughput", f"{fmt_metric('throughput', result.throughput)} samples/s  (spread {spread} over "
                            f"{len(result.windows)} windows)")
    shown = {"throughput", "throughput_spread"}
    if result.get("compile_seconds") is not None:
        from tuner.analysis import break_even_text

        line = break_even_text(result.get("compile_seconds"), result.throughput, result.get("eager_throughput"),
                               "from the pre-flight's eager steps")
        t.add_row("compile", escape(f"{line}; {result.get('graph_breaks')} graph breaks, "
                                    f"{result.get('recompiles')} recompiles"))
    if result.optimizer:
        t.add_row("optimizer", optimizer_text(result.optimizer))
    for m in METRICS:
        if m.key not in shown and result.get(m.key) is not None:
            label, unit = m.label, m.unit
            if m.key == "unit_throughput" and result.get("sample_unit"):
                label = unit = f"{result.get('sample_unit')}/s"
            t.add_row(escape(label), escape(f"{fmt_metric(m.key, result.get(m.key))} {unit}".rstrip()))
    for key in sorted(k for k in result.metrics if k not in {m.key for m in METRICS} | {"sample_unit"}):
        t.add_row(escape(key), escape(fmt_metric(key, result.get(key))))
    if target is not None:
        ttt = result.get("time_to_target")
        reached = (f"reached in {ttt:.3g} s of training, {result.get('samples_to_target'):,} samples (evaluations "
                   f"apart: {result.get('target_eval_seconds') or 0:.3g} s)") if ttt is not None \
            else "not reached within the budget"
        t.add_row("target", escape(f"{target.describe()}, evaluated every {target.eval_every_samples:,} samples: "
                                   f"{reached}"))
    if result.quality_curve:
        t.add_row("quality curve", escape(curve_text(result.quality_curve)))
    if result.capped:
        t.add_row("capped", "stopped by the wall-time cap before the budget was spent")
    if result.sample_grid:
        t.add_row("sample grid", escape(result.sample_grid))
    if result.traceback:
        t.add_row("traceback", escape(result.traceback.rstrip()))
    t.add_row("device", escape(result.device))
    stdout_console().print(t)


def curve_text(curve: list[list[Any]]) -> str:
    """`5 evaluations: 2.31 at 512 samples (0.8 s), ..., 1.58 at 2,560 (4.1 s)`: the first two and the last."""
    from tuner.study import fmt

    def point(p: list[Any]) -> str:
        q = "-" if p[2] is None else fmt(float(p[2]), 4)
        return f"{q} at {int(p[0]):,} samples ({p[1]:.3g} s)"

    shown = [point(p) for p in curve] if len(curve) <= 3 else [point(curve[0]), point(curve[1]), "...",
                                                               point(curve[-1])]
    return f"{len(curve)} evaluation{'s' if len(curve) != 1 else ''}: " + ", ".join(shown)
