"""The live view of a search: one line per finished trial, a status line while trials run, the front at the end."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

STATE_STYLE = {"complete": "green", "oom": "yellow", "diverged": "yellow", "error": "red"}


def fmt_value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def trial_line(record: dict[str, Any], metrics: list[str], params: list[str]) -> Text:
    """`#0003 complete  throughput 712.3  fid 45.21  batch_size=64 precision=fp32 ...  24.1 s`"""
    state = str(record.get("state"))
    line = Text()
    line.append(f"#{int(record['trial']):04d} ", style="bold")
    line.append(f"{state:<9}", style=STATE_STYLE.get(state, ""))
    if state == "complete":
        line.append("  " + "  ".join(f"{m} {fmt_value(record.get(m))}" for m in metrics))
        if record.get("capped"):
            line.append("  (capped)", style="yellow")
    else:
        line.append("  " + str(record.get("error") or ""), style="dim")
    shown = record.get("params", {})
    line.append("  " + " ".join(f"{p}={fmt_value(shown[p])}" for p in params if p in shown), style="cyan")
    seconds = record.get("run_seconds")
    if isinstance(seconds, (int, float)):
        line.append(f"  {seconds:.1f} s", style="dim")
    return line


class SearchView:
    """Prints finished trials as they come and keeps a transient status line (running, done, elapsed)."""

    def __init__(self, console: Console, total: int, done: int, metrics: list[str], params: list[str]) -> None:
        self.console = console
        self.total, self.done, self.running = total, done, 0
        self.metrics, self.params = metrics, params
        self._start = time.monotonic()
        self._live: Live | None = None
        self._last_refresh = 0.0

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

    def trial_finished(self, record: dict[str, Any], was_running: bool = True) -> None:
        self.running = max(0, self.running - int(was_running))
        self.done += 1
        self.console.print(trial_line(record, self.metrics, self.params), soft_wrap=True)
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._live is None or (not force and now - self._last_refresh < 0.25):
            return
        self._last_refresh = now
        self._live.update(self._status(), refresh=True)

    def _status(self) -> Text:
        elapsed = int(time.monotonic() - self._start)
        return Text(f"{self.done}/{self.total} trials done, {self.running} running, "
                    f"{elapsed // 60}:{elapsed % 60:02d} elapsed", style="dim")


def front_table(front: list[dict[str, Any]], metrics: list[str], params: list[str], title: str) -> Table:
    """The Pareto front, best first objective first; params that no front trial sets are left out."""
    params = [p for p in params if any(rec.get("params", {}).get(p) is not None for rec in front)]
    table = Table(title=title, title_justify="left")
    table.add_column("trial", justify="right")
    for m in metrics:
        table.add_column(m, justify="right")
    for p in params:
        table.add_column(p, justify="right")
    for rec in front:
        shown = rec.get("params", {})
        table.add_row(str(rec["trial"]), *[fmt_value(rec.get(m)) for m in metrics],
                      *[escape(fmt_value(shown.get(p))) for p in params])
    return table
