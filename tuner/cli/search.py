"""`tuner search` and `tuner spaces`: parse, call tuner.search, print."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tuner.cli.app import (Debug, Format, FormatOption, app, note, print_json, print_table, stderr_console,
                           stdout_console,
                           user_output)
from tuner.schedule import scheduler_help
from tuner.schedule import scheduler_options as registered_options

spaces_app = typer.Typer(help="List and show the bundled search spaces.", no_args_is_help=False)
app.add_typer(spaces_app, name="spaces")


# --help's panels: a newcomer finds an option by what it is about, and each panel's table is only as wide as its
# own flags (one table of 38 options left the help text 20 columns of an 80-column terminal)
STUDY, BUDGET, SCHEDULE, TARGET = "What to search", "Budget", "Sampler and scheduler", "Time to target"
CHECKS, MACHINE, OUTPUT = "Confirmation and checks", "Machine and Ray", "Output"


def with_scheduler_options(func: Any) -> Any:
    """`func`'s signature with each registered scheduler's options (tuner.schedule: `Scheduler.options`) as typer
    options after --scheduler, in place of its `**scheduler_options`: a scheduler's flag, help and metavar are
    declared once, in its own module."""
    sig = inspect.signature(func, eval_str=True)
    params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    at = next(i for i, p in enumerate(params) if p.name == "scheduler") + 1
    flags = [inspect.Parameter(o.param, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation=Annotated[Optional[float], typer.Option(o.flag, metavar=o.metavar,
                                                                                  help=o.help,
                                                                                  rich_help_panel=SCHEDULE)])
             for o in registered_options()]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params[:at] + flags + params[at:]]
    func.__signature__ = sig.replace(parameters=params)
    return func


@app.command()
@with_scheduler_options
def search(
    space: Annotated[Optional[str], typer.Option(help="Search space: a bundled name (see `tuner spaces`) or a YAML path.", rich_help_panel=STUDY)] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name (default: the space's name).", rich_help_panel=STUDY)] = None,
    trials: Annotated[Optional[int], typer.Option(help="Total trials in the study (default: the space's).", rich_help_panel=STUDY)] = None,
    workload: Annotated[Optional[str], typer.Option(help="gan, cnn, package.module:make or path/to/file.py:make (default: the space's).", rich_help_panel=STUDY)] = None,
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="A workload option KEY=VALUE (VALUE read as YAML), e.g. -o image_size=64; repeat for several.", rich_help_panel=STUDY)] = None,
    dataset: Annotated[Optional[str], typer.Option(help="For the built-ins: digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR or folder:DIR; passed to a user workload's factory as dataset=.", rich_help_panel=STUDY)] = None,
    budget_seconds: Annotated[Optional[float], typer.Option(help="Train each trial this many seconds.", rich_help_panel=BUDGET)] = None,
    budget_samples: Annotated[Optional[int], typer.Option(help="Train each trial on this many samples.", rich_help_panel=BUDGET)] = None,
    sampler: Annotated[Optional[str], typer.Option(help="tpe (default, constant liar), nsga2 or random.", rich_help_panel=SCHEDULE)] = None,
    seed: Annotated[Optional[int], typer.Option(help="Sampler seed (default 0).", rich_help_panel=SCHEDULE)] = None,
    scheduler: Annotated[Optional[str], typer.Option(help=scheduler_help(), rich_help_panel=SCHEDULE)] = None,
    study_seconds: Annotated[Optional[float], typer.Option(help="Wall-time allowance of this invocation (probes, trials, confirmation), plus a margin of 10% (at least 20 s): no trial is started that cannot finish before the confirmation's reserve; running trials finish. --trials becomes a maximum (default: as many as fit).", rich_help_panel=BUDGET)] = None,
    target: Annotated[Optional[str], typer.Option(help="Time to this quality (a value of the workload's quality metric, in its direction, or 'baseline': the quality the baseline's settings reach in a third of the budget, the mean of their last 3 evaluations, so the cap of 3x their time to it is about the budget; default: the space's target:): every trial evaluates every --eval-every-samples samples, stops at the first evaluation that meets it, and records time_to_target and samples_to_target; one that never does ends 'not reached'.", rich_help_panel=TARGET)] = None,
    eval_every_samples: Annotated[Optional[int], typer.Option(help="With a target: training samples between two evaluations, the same for every trial (default: from the pre-flight's measured pace, in whole optimizer steps of the baseline: the finest K whose evaluation costs at most a fifth of the training between two, and at most 20 evaluations over the baseline's reference run; 25 steps where no pace was measured).", rich_help_panel=TARGET)] = None,
    target_seeds: Annotated[Optional[int], typer.Option(help="With --target baseline: seeds of the baseline's reference run the target is read from, the median of the quality each settles at (default 3: one seed's target moved 10-20% with the seed). Each seed trains a third of the budget, so 3 cost about one trial's budget before the first trial; the study says their spread.", rich_help_panel=TARGET)] = None,
    horizon: Annotated[Optional[str], typer.Option(metavar="DURATION", help="After the confirmation, re-train the study's pick and its baseline to this horizon, interleaved, --horizon-seeds seeds each, and say whether the speed-up holds there (holds, shrinks or reverses), at the quality the baseline reaches at the horizon: what `tuner export --horizon` runs, its cost said before it starts. Training seconds (120s, 2m, 1.5h) or samples (50000samples); longer than the trials. Kept by --resume; recorded in the study folder (horizon.json); the summary, report and export show it. A study with no pick or no target skips it and says why.", rich_help_panel=TARGET)] = None,
    horizon_seeds: Annotated[Optional[int], typer.Option(metavar="N", help="Seeds of each side for --horizon (default 3).", rich_help_panel=TARGET)] = None,
    objective: Annotated[Optional[list[str]], typer.Option(metavar="METRIC", help="What the study optimizes, over the space's objectives: (repeat, or comma-separate, for several): time_to_target or samples_to_target (need a target), or the default pair throughput and quality (the workload's own), or another metric tuner measures to optimize (peak_mem_mb, ...).", rich_help_panel=STUDY)] = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Trials at once (default: one per GPU, or one on all cores).", rich_help_panel=MACHINE)] = None,
    cpus_per_trial: Annotated[Optional[float], typer.Option(help="CPUs per trial (default: all of them / per GPU).", rich_help_panel=MACHINE)] = None,
    gpus_per_trial: Annotated[Optional[float], typer.Option(help="GPUs per trial (default: 1 on a GPU machine; >1 runs DDP).", rich_help_panel=MACHINE)] = None,
    storage: Annotated[Optional[str], typer.Option(help="Optuna database URL (default: sqlite in the study folder).", rich_help_panel=MACHINE)] = None,
    address: Annotated[Optional[str], typer.Option(help="Join this Ray cluster instead of starting one.", rich_help_panel=MACHINE)] = None,
    reports_dir: Annotated[Path, typer.Option(help="Where studies live: <reports-dir>/<study>/.", rich_help_panel=OUTPUT)] = Path("reports"),
    confirm: Annotated[Optional[int], typer.Option(help="After the search, re-run this many Pareto-front trials and the baseline (0: no confirmation; default 1: the knee).", rich_help_panel=CHECKS)] = None,
    repeats: Annotated[Optional[int], typer.Option(help="Re-runs of each confirmed trial, interleaved (default 2; 3 where the study has a target).", rich_help_panel=CHECKS)] = None,
    probe: Annotated[bool, typer.Option("--probe/--no-probe", help="Decide the speed-only knobs (loader, channels_last, cuDNN, optimizer implementation, threads, and the environment's OpenMP wait policy and malloc thresholds), a precision or TF32 the parity check finds within seed noise, and an exact split of the effective batch (no batch statistics) by probing ceilings before the trials, so the trials search only what changes what is learned; --no-probe samples and trains every knob as a trial (default: probe).", rich_help_panel=CHECKS)] = True,
    parity_seconds: Annotated[Optional[float], typer.Option(metavar="S", help="The numerics parity check before the trials (a precision, TF32 or compile mode the space may pick, trained beside fp32 and its seed noise), at most this many seconds by the pre-flight's step time: fewer steps where it would take longer (the verdict says so), none where fewer than 25 fit (the trials' quality decides those knobs); under --study-seconds, at most half the time left after one trial and the confirmation's reserve; 0 skips it (default 120).", rich_help_panel=CHECKS)] = None,
    busy: Annotated[str, typer.Option(metavar="note|wait|refuse", help="On a machine other work shares (other processes take 20% or more of the CPUs in a 1 s sample before the study): note says so and measures on (each trial records the share others took; the verdict says which figures it touches), wait waits for a quiet machine before the study and before each trial and re-run (at most --busy-wait-seconds each), refuse stops before anything is written (default note).", rich_help_panel=MACHINE)] = "note",
    busy_wait_seconds: Annotated[float, typer.Option(metavar="S", help="With --busy wait: the longest wait for a quiet machine, each time (default 120).", rich_help_panel=MACHINE)] = 120.0,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an existing study up to --trials.", rich_help_panel=STUDY)] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Ray's and Optuna's own logs.", rich_help_panel=OUTPUT)] = False,
    format: FormatOption = Format.table,
    debug: Debug = False,
    **scheduler_options: Optional[float],  # each registered scheduler's own flags (with_scheduler_options)
) -> None:
    """Search a space with Ray Tune + Optuna, scoring every trial on throughput and quality."""
    from tuner.cli.app import stdout_to_stderr
    from tuner.cli.progress import SearchView
    from tuner.search import SearchOptions, run_search

    opts = SearchOptions(
        space=space, study=study, trials=trials, workload=workload, dataset=dataset,
        workload_options=parse_options(option or []), budget_seconds=budget_seconds,
        budget_samples=budget_samples, sampler=sampler, seed=seed, concurrency=concurrency,
        cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial, storage=storage, address=address,
        reports_dir=reports_dir, resume=resume, verbose=verbose, confirm=confirm, repeats=repeats,
        probe=probe, parity_seconds=parity_seconds, scheduler=scheduler,
        study_seconds=study_seconds, busy=busy, busy_wait_seconds=busy_wait_seconds,
        target=target_value(target), eval_every_samples=eval_every_samples, target_seeds=target_seeds,
        objectives=objective_names(objective), horizon=horizon, horizon_seeds=horizon_seeds,
        scheduler_options={o.key: scheduler_options.get(o.param) for o in registered_options()},
    )
    # Ray's tables and logs must not precede the JSON document; the workload's prints (the driver's pre-flight,
    # trials run here) go to stderr whatever the format
    with stdout_to_stderr(format is Format.json), user_output():
        summary = run_search(opts, console=stderr_console(), view=SearchView)
        from tuner.cli.report import study_horizon

        check = study_horizon(summary, reports_dir) if not summary.interrupted and summary.ended is None else None
    if format is Format.json:
        print_json({**_summary_json(summary), **({"horizon": check.doc} if check is not None else {})})
    else:
        _print_summary(summary, check.line if check is not None else None)
    if check is not None and check.failed is not None:
        raise typer.Exit(check.failed.exit_code)  # a run of the check failed (exit 3): its line is the summary's
    if summary.interrupted:
        done = f"{summary.finished} trials, interrupted" if summary.as_many_as_fit else \
            f"{summary.finished} of {summary.total} trials"
        if summary.in_confirmation:
            done += ", before its confirmation finished (--resume runs the re-runs left)"
        note(f"tuner: search stopped after {done}; continue with "
             f"`tuner search --study {summary.name} --reports-dir {reports_dir} --resume`")
        raise typer.Exit(summary.exit_code)  # 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP
    if summary.ended is not None:  # a set-up timeout ended it: its one line, as in the probes (exit 2)
        from tuner.errors import WorkloadError

        raise WorkloadError(summary.ended)


def parse_options(items: list[str]) -> dict[str, Any]:
    """`-o key=value` pairs; values are read as YAML scalars (64 is a number, true a bool, fp16 a string)."""
    import yaml

    from tuner.errors import ConfigError
    from tuner.files import YamlRefused, safe_yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE with KEY a Python name, e.g. image_size=64")
        try:
            out[key.strip()] = safe_yaml(raw) if raw.strip() else ""
        except YamlRefused as err:
            raise ConfigError(f"--option {item!r}: {err}") from None
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out


def _summary_json(summary: Any) -> dict[str, Any]:
    from tuner.report.view import trial_document

    verdict = summary.verdict
    noise = summary.study.noise()
    return {"study": summary.name, "folder": str(summary.study_dir), "trials": summary.total,
            "finished": summary.finished, "ran": summary.ran, "states": summary.states,
            "seconds": round(summary.seconds, 1), "interrupted": summary.interrupted, "ended": summary.ended, "warnings": summary.warnings,
            "notes": summary.notes,
            "objectives": [o.model_dump() for o in summary.objectives],
            "target": t.model_dump() if (t := summary.study.target) is not None else None,
            "front": [trial_document(summary.study, r) for r in summary.front],
            "verdict": verdict.to_json() if verdict is not None else None,
            "noise": None if noise is None else noise.to_json(),
            "time": None if (shares := summary.shares) is None else shares.to_json()}


def _print_summary(summary: Any, horizon: str | None = None) -> None:
    from tuner.cli.progress import front_table

    out = stdout_console()
    states = ", ".join(f"{n} {s}" for s, n in summary.states.items()) or "no trials"
    count = f"{summary.finished}" if summary.as_many_as_fit else f"{summary.finished}/{summary.total}"
    print(f"study {summary.name}: {count} trials ({states}) in {summary.seconds:.0f} s"
          + (", interrupted" if summary.interrupted and summary.as_many_as_fit else ""))
    if (shares := summary.shares) is not None:
        print(shares.text())
    verdict = summary.verdict
    if summary.front:
        from tuner.report.view import adjusted_metrics, counted, figure_text

        title = (f"Pareto front ({counted(len(summary.front), 'trial')}): "
                 + ", ".join(f"{o.metric} {o.mode}" for o in summary.objectives))

        adjusted = adjusted_metrics(summary.study)  # the figures the front and the pick rank by, as the report
        print_table(out, front_table(summary.front, summary.objectives, summary.study.params(), title=title,
                                     pick=verdict.pick if verdict is not None else None,
                                     figure=lambda r, key: figure_text(summary.study, r, key, adjusted)))
    else:
        print(f"Pareto front: empty ({_why_no_front(summary)})")
    if (line := summary.study.target_text()) is not None:
        print(line)
    noise = summary.study.noise()
    if noise is not None:
        print(f"noise floor: {noise.text()}; ✓ = confirmed: mean of the re-runs (95% interval)")
    if verdict is not None:
        print(f"pick: {verdict.text}")
    if horizon is not None:
        print(horizon)
    print(f"report: {summary.study.folder.csv_path} (study folder {summary.study_dir}); "
          f"`tuner report {summary.name}` for every trial")


def _why_no_front(summary: Any) -> str:
    """Why the front is empty: no trial completed, or (issue 51: "no complete trial yet" under 8 complete trials)
    none of those that did has a finite value for every objective."""
    done = [r for r in summary.study.records if r.complete]
    if not done:
        return "no complete trial yet"
    lacking = [o.metric for o in summary.objectives
               if all(r.value(o.metric) is None for r in done)]
    what = f"a finite {' or '.join(lacking)}" if lacking else "finite values for every objective"
    return f"{len(done)} complete trial{'s' if len(done) != 1 else ''}, none with {what}"


def _machine_context() -> dict[str, Any] | None:
    """The sampling context a default `tuner search` on this machine would give its trials (None: none here)."""
    from tuner.device import device_facts, resolve_device
    from tuner.errors import UserError
    from tuner.search import SearchOptions
    from tuner.search import cpu_facts, trial_context
    from tuner.search import local_cluster, resolve_resources

    try:
        resources = resolve_resources(SearchOptions(), local_cluster())
        facts = device_facts(resolve_device("cuda")) if resources.gpus_per_trial > 0 else cpu_facts()
    except UserError as err:
        note(f"tuner: on this machine: {err}")
        return None
    return trial_context(resources, facts)


def _here(sp: Any) -> tuple[Any, dict[str, Any]] | None:
    """The space resolved as a default `tuner search` on this machine would resolve it (None: nothing depends on
    the machine, or its domains would come out empty here)."""
    if not sp.unresolved:
        return None
    from tuner.errors import UserError

    ctx = _machine_context()
    if ctx is None:
        return None
    try:
        return sp.resolve(ctx), ctx
    except UserError as err:
        note(f"tuner: on this machine: {err}")
        return None


@spaces_app.callback(invoke_without_command=True)
def spaces_default(ctx: typer.Context, format: FormatOption = Format.table, debug: Debug = False) -> None:
    """List the bundled search spaces (the default when no subcommand is given)."""
    if ctx.invoked_subcommand is None:
        list_spaces_cmd(format)


@spaces_app.command("list")
def list_spaces_cmd(format: FormatOption = Format.table, debug: Debug = False) -> None:
    """List the bundled search spaces with a one-line description."""
    from rich.table import Table

    from tuner.space import list_spaces

    spaces = list_spaces()
    if format is Format.json:
        print_json([{"name": sp.name, "description": sp.description, "source": sp.source} for sp in spaces])
        return
    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("space")
    table.add_column("description")
    for sp in spaces:
        table.add_row(sp.name, sp.description)
    stdout_console().print(table)


@spaces_app.command("show")
def show_space(name: Annotated[str, typer.Argument(help="A bundled space's name, or a path to a YAML file.")],
               format: FormatOption = Format.table, debug: Debug = False) -> None:
    """Print one space: its file and what it searches."""
    from tuner.files import read_text
    from tuner.space import load_space, resolve_space_path

    from tuner.space import clamp_notes, knob_notes

    path = resolve_space_path(name)
    sp = load_space(str(path))
    here = _here(sp)
    if format is Format.json:
        doc = {"name": sp.name, "source": str(path), **sp.definition()}
        if here is not None:
            doc["here"] = {"context": here[1], "params": here[0].definition()["params"]}
        if (ctx := here[1] if here is not None else _machine_context()) is not None:
            doc["knobs_here"] = knob_notes(sp, ctx)
        if qualities := _qualities(sp):
            doc["workload_quality"] = {key: {"workload": ref, **({"metric": q.metric, "direction": q.direction}
                                                                 if q is not None else {"error": why})}
                                       for key, (ref, q, why) in qualities.items()}
        print_json(doc)
        return
    print(f"# {sp.name}: {path}")
    print(read_text(path, "space file").rstrip())
    print("")
    print(f"# searches {len(sp.searched)} params:")
    for pname, spec in sp.params.items():
        print(f"#   {pname:<20} {spec.describe()}")
        for line in clamp_notes(pname, spec):
            print(f"#   {'':<20} ({line})")
    if here is not None:
        resolved, ctx = here
        gpus = f", {ctx['gpus']} GPU" if ctx["gpus"] else ""
        print(f"# on this machine ({ctx['cpus']} CPUs per trial{gpus}, {ctx['device']}), `tuner search` would use:")
        for pname, spec in sp.params.items():
            if spec.unresolved:
                print(f"#   {pname:<20} {resolved.params[pname].describe()}")
    ctx = here[1] if here is not None else _machine_context()
    if ctx is not None and (notes := knob_notes(sp, ctx)):
        print(f"# knobs on this machine ({ctx['device']}):")
        for line in notes:
            print(f"#   {line}")
    qualities = _qualities(sp)
    for workload, objectives in sp.objectives.items():
        described = [o.describe() if o.metric != "quality" else _quality_text(workload, *qualities[workload])
                     for o in objectives]
        print(f"# {'' if workload == 'default' else workload + ' '}objectives: " + ", ".join(described))


def _qualities(sp: Any) -> dict[str, tuple[str, Any, str | None]]:
    """For each objectives entry that names `metric: quality`: the workload it stands for (the entry's own, or the
    space's default workload for the list every workload shares, found from the space's folder as `tuner search`
    finds it) and the quality objective that workload declares (Workload.quality), loading it (its factory runs,
    as a search runs it); (workload, None, why) when it cannot be loaded here."""
    from tuner.study import Objective
    from tuner.builtin import resolve_workload
    from tuner.workload import build

    out: dict[str, tuple[str, Any, str | None]] = {}
    for key, objectives in sp.objectives.items():
        if not any(o.metric == "quality" for o in objectives):
            continue
        default = key == "default"
        given = sp.defaults.workload if default else key
        text = given
        try:
            ref = resolve_workload(given, base=Path(sp.source).parent if sp.source else None)
            text = ref.text
            with user_output():  # what the factory prints goes to stderr: stdout is the space
                workload = build(ref, sp.defaults.workload_options if default else {},
                                 sp.defaults.dataset if default else None)
        except Exception as err:  # noqa: BLE001 - the user's code: any error is theirs, named in one line
            out[key] = (text, None, f"{type(err).__name__}: {err}".splitlines()[0])
            continue
        declared = workload.quality
        out[key] = (text, Objective(metric=declared[0], direction=declared[1]) if declared else None,
                    None if declared else "it declares no Workload.quality")
    return out


def _quality_text(key: str, ref: str, quality: Any, why: str | None) -> str:
    if quality is None:
        return f"quality (the workload's Workload.quality; {ref} could not be loaded here: {why})"
    other = "; another --workload brings its own" if key == "default" else ""
    return f"quality (the workload's: {quality.describe()} for {ref}{other})"


def objective_names(given: list[str] | None) -> tuple[str, ...] | None:
    """--objective's names, repeated or comma-separated (`throughput,quality`); None: not given."""
    names = tuple(n.strip() for item in given or [] for n in item.split(",") if n.strip())
    return names or None


def target_value(given: str | None) -> float | str | None:
    """--target's value: a number, or 'baseline' (derived from the baseline's training)."""
    if given is None or given.strip().lower() == "baseline":
        return given and "baseline"
    try:
        return float(given)
    except ValueError:
        from tuner.errors import ConfigError

        raise ConfigError(f"--target must be a number on the workload's quality metric or 'baseline' (got "
                          f"{given!r})") from None
