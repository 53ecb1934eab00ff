"""`tuner search` and `tuner spaces`: parse, call tuner.search, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

spaces_app = typer.Typer(help="List and show the bundled search spaces.", no_args_is_help=False)


def search(
    space: Annotated[Optional[str], typer.Option(help="Search space: a bundled name (see `tuner spaces`) or a YAML path.")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name (default: the space's name).")] = None,
    trials: Annotated[Optional[int], typer.Option(help="Total trials in the study (default: the space's).")] = None,
    workload: Annotated[Optional[str], typer.Option(help="gan or cnn (default: the space's).")] = None,
    dataset: Annotated[Optional[str], typer.Option(help="digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR or folder:DIR.")] = None,
    budget_seconds: Annotated[Optional[float], typer.Option(help="Train each trial this many seconds.")] = None,
    budget_samples: Annotated[Optional[int], typer.Option(help="Train each trial on this many samples.")] = None,
    sampler: Annotated[Optional[str], typer.Option(help="tpe (default, constant liar), nsga2 or random.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Sampler seed (default 0).")] = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Trials at once (default: one per GPU, or one on all cores).")] = None,
    cpus_per_trial: Annotated[Optional[float], typer.Option(help="CPUs per trial (default: all of them / per GPU).")] = None,
    gpus_per_trial: Annotated[Optional[float], typer.Option(help="GPUs per trial (default: 1 on a GPU machine; >1 runs DDP).")] = None,
    storage: Annotated[Optional[str], typer.Option(help="Optuna database URL (default: sqlite in the study folder).")] = None,
    address: Annotated[Optional[str], typer.Option(help="Join this Ray cluster instead of starting one.")] = None,
    reports_dir: Annotated[Path, typer.Option(help="Where studies live: <reports-dir>/<study>/.")] = Path("reports"),
    resume: Annotated[bool, typer.Option("--resume", help="Continue an existing study up to --trials.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Ray's and Optuna's own logs.")] = False,
) -> None:
    """Search a space with Ray Tune + Optuna, scoring every trial on throughput and quality."""
    from rich.console import Console

    from tuner.search import SearchOptions, run_search

    opts = SearchOptions(
        space=space, study=study, trials=trials, workload=workload, dataset=dataset, budget_seconds=budget_seconds,
        budget_samples=budget_samples, sampler=sampler, seed=seed, concurrency=concurrency,
        cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial, storage=storage, address=address,
        reports_dir=reports_dir, resume=resume, verbose=verbose,
    )
    summary = run_search(opts, console=Console(stderr=True, highlight=False))
    _print_summary(summary)
    if summary.interrupted:
        typer.echo(f"tuner: search stopped after {summary.finished} of {summary.total} trials; continue with "
                   f"`tuner search --study {summary.study} --reports-dir {reports_dir} --resume`", err=True)
        raise typer.Exit(130)


def _print_summary(summary) -> None:  # noqa: ANN001 - tuner.search.SearchSummary, imported lazily
    from rich.console import Console

    from tuner.search.progress import front_table

    out = Console(highlight=False)
    if not out.is_terminal:  # a file or a pipe: no reason to squeeze the table into 80 columns
        out = Console(highlight=False, width=200)
    states = ", ".join(f"{n} {s}" for s, n in sorted(summary.states.items())) or "no trials"
    typer.echo(f"study {summary.study}: {summary.finished}/{summary.total} trials ({states}) "
               f"in {summary.seconds:.0f} s")
    metrics = [o.metric for o in summary.objectives]
    if summary.front:
        out.print(front_table(summary.front, metrics, summary.params,
                              title=f"Pareto front ({len(summary.front)} trials): "
                                    + ", ".join(f"{o.metric} {o.mode}" for o in summary.objectives)))
    else:
        typer.echo("Pareto front: empty (no complete trial yet)")
    typer.echo(f"report: {summary.study_dir / 'trials.csv'} (study folder {summary.study_dir})")


@spaces_app.callback(invoke_without_command=True)
def spaces_default(ctx: typer.Context) -> None:
    """List the bundled search spaces (the default when no subcommand is given)."""
    if ctx.invoked_subcommand is None:
        list_spaces_cmd()


@spaces_app.command("list")
def list_spaces_cmd() -> None:
    """List the bundled search spaces with a one-line description."""
    from rich.console import Console
    from rich.table import Table

    from tuner.search.space import list_spaces

    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("space")
    table.add_column("description")
    for sp in list_spaces():
        table.add_row(sp.name, sp.description)
    Console(highlight=False).print(table)


@spaces_app.command("show")
def show_space(name: Annotated[str, typer.Argument(help="A bundled space's name, or a path to a YAML file.")]) -> None:
    """Print one space: its file and what it searches."""
    from tuner.search.space import load_space, resolve_space_path

    path = resolve_space_path(name)
    sp = load_space(str(path))
    typer.echo(f"# {sp.name}: {path}")
    typer.echo(path.read_text().rstrip())
    typer.echo("")
    typer.echo(f"# searches {len(sp.searched)} params:")
    for pname, spec in sp.params.items():
        typer.echo(f"#   {pname:<20} {spec.describe()}")
    for workload, objectives in sp.objectives.items():
        typer.echo(f"# {workload} objectives: " + ", ".join(f"{o.metric} ({o.mode})" for o in objectives))


def register(app: typer.Typer) -> None:
    app.command("search")(search)
    app.add_typer(spaces_app, name="spaces")
