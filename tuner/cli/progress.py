"""The live view of a search: one line per finished trial, a status line while trials run, the front at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tuner.study import Objective, TrialRecord, fmt_figure, fmt_metric, fmt_param, state_style, unit_suffix
from tuner.analysis import reason

def trial_line(record: TrialRecord, objectives: list[Objective], params: list[str]) -> Text:
    """`#0003 complete  throughput 712.3  fid 45.21  input-bound, 40% of compute ceiling  6% of peak  batch_size=64 ...
    24.1 s`"""
    line = Text()
    line.append(f"#{record.trial:04d} ", style="bold")
    line.append(f"{record.state:<9}", style=state_style(record.state))
    if record.state == "stopped":  # real figures, taken at a lower rung: shown, never ranked
        line.append("  " + "  ".join(f"{o.metric} {fmt_metric(o.metric, record.get(o.metric))}" for o in objectives))
        if record.rung is not None:
            line.append(f"  at rung {record.rung}", style="blue")
    elif record.complete:
        line.append("  " + "  ".join(f"{o.metric} {fmt_metric(o.metric, record.get(o.metric))}" for o in objectives))
        if "unit_throughput" not in {o.metric for o in objectives} and unit_suffix("unit_throughput", record):
            line.append(f"  {fmt_metric('unit_throughput', record.get('unit_throughput'))}"
                        f"{unit_suffix('unit_throughput', record)}")
        if record.capped:
            line.append("  (capped)", style="yellow")
        if why := reason(record):  # against the default allowance: the study's noise floor comes later
            line.append(f"  suspect: {why}", style="yellow")
        share = record.value("of_compute_ceiling")
        if record.get("bound") and share is not None:
            line.append(f"  {record.get('bound')}, {share:.0%} of compute ceiling", style="magenta")
        if (peak := record.value("of_peak")) is not None:  # the other headroom figure: of the device's matmul peak
            line.append(f"  {peak:.0%} of peak", style="magenta")
    else:
        line.append("  " + str(record.error or ""), style="dim")
    shown = record.params
    line.append("  " + " ".join(f"{p}={fmt_param(record, p)}" for p in params if p in shown), style="cyan")
    if record.run_seconds is not None:
        # the trial's whole process (set-up, noise scale, scoring), not wall_seconds: labelled so it is not read as that
        line.append(f"  run {record.run_seconds:.1f} s", style="dim")
    return line


class SearchView:
    """Prints finished trials as they come and keeps a transient status line (running, done, elapsed)."""

    def __init__(self, console: Console, total: int, done: int, objectives: list[Objective],
                 params: list[str]) -> None:
        self.console = console
        self.total, self.done, self.running = total, done, 0
        self.objectives, self.params = objectives, params
        self._start = time.monotonic()
        self._live: Live | None = None
        self._last_refresh = 0.0
        self._deadline: float | None = None  # --study-seconds: the allowance's end (time.perf_counter)
        self._bounded = True

    def set_deadline(self, deadline: float, bounded: bool = True) -> None:
        """Show the time left of the study's allowance; `bounded` False: no --trials, so no "of N"."""
        self._deadline, self._bounded = deadline, bounded

    def start(self) -> None:
        if self.console.is_terminal:
            self._live = Live(self._status(), console=self.console, transient=True, auto_refresh=False)
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def trial_started(self) -> None:
        self.running += 1
        self.refresh(force=True)

    def trial_finished(self, record: TrialRecord, was_running: bool = True) -> None:
        self.running = max(0, self.running - int(was_running))
        self.done += 1
        self.console.print(trial_line(record, self.objectives, self.params), soft_wrap=True)
        self.refresh(force=True)

    def confirming(self, counts: dict[int, int]) -> None:
        """A round of re-runs starts: `counts` is each trial's number of re-runs in it, in the round's order."""
        runs = sum(counts.values())
        self.total, self.done, self.running = self.done + runs, self.done, 0
        self._bounded = True
        each = (f"{next(iter(counts.values()))} each" if len(set(counts.values())) == 1 else
                ", ".join(f"{n} of trial {t}" for t, n in counts.items()))
        if runs == 1:
            self.console.print(f"confirming trial {next(iter(counts))}: 1 re-run", style="bold", soft_wrap=True)
        else:
            self.console.print(f"confirming trials {', '.join(str(t) for t in counts)}: {runs} re-runs, {each}, "
                               f"interleaved", style="bold", soft_wrap=True)
        self.refresh(force=True)

    def rerun_finished(self, number: int, rerun: Any) -> None:
        self.running = max(0, self.running - 1)
        self.done += 1
        line = Text()
        line.append(f"#{number:04d} ", style="bold")
        line.append(f"re-run {rerun.repeat + 1:<3}", style="magenta")
        line.append(f"{rerun.state:<9}", style=state_style(rerun.state))
        if rerun.complete:
            line.append("  " + "  ".join(f"{o.metric} {fmt_metric(o.metric, rerun.get(o.metric))}"
                                         for o in self.objectives))
        else:
            line.append("  " + str(rerun.error or ""), style="dim")
        self.console.print(line, soft_wrap=True)
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._live is None or (not force and now - self._last_refresh < 0.25):
            return
        self._last_refresh = now
        self._live.update(self._status(), refresh=True)

    def _status(self) -> Text:
        elapsed = int(time.monotonic() - self._start)
        left = ""
        if self._deadline is not None:
            secs = max(0, int(self._deadline - time.perf_counter()))
            left = f", {secs // 60}:{secs % 60:02d} left"
        done = f"{self.done}/{self.total}" if self._bounded else f"{self.done}"
        return Text(f"{done} trials done, {self.running} running, "
                    f"{elapsed // 60}:{elapsed % 60:02d} elapsed{left}", style="dim")


def front_table(front: list[TrialRecord], objectives: list[Objective], params: list[str], title: str,
                pick: TrialRecord | None = None, figure: Callable[[TrialRecord, str], str] | None = None) -> Table:
    """The Pareto front, best first objective first; params that no front trial sets are left out. Confirmed trials
    (✓) show their re-runs' centre and interval, or `figure`'s text (the report's, where drift between rounds
    moved the figures the front is ranked by). The `pick` is marked; one off the front (a trial's single reading
    can dominate the confirmed pick, as the verdict explains) gets a row of its own below, so the table shows what
    the pick line names, and the title says so (it counts the front's trials alone)."""
    shown = figure or fmt_figure
    off = pick is not None and all(rec.trial != pick.trial for rec in front)
    rows = [*front, pick] if off and pick is not None else front
    params = [p for p in params if any(rec.params.get(p) is not None for rec in rows)]
    if off:
        title += "; below the line, the pick (off the front)"
    table = Table(title=title, title_justify="left")
    table.add_column("trial", justify="right")
    for o in objectives:
        table.add_column(f"{o.metric} {o.arrow}", justify="right")
    for p in params:
        table.add_column(p, justify="right")
    for rec in rows:
        if off and rec is pick:
            table.add_section()
        table.add_row(f"{rec.trial}{' ✓' if rec.confirmed is not None else ''}"
                      f"{' pick' if pick is not None and rec.trial == pick.trial else ''}",
                      *[shown(rec, o.metric) for o in objectives],
                      *[escape(fmt_param(rec, p)) for p in params])
    return table
