"""One way to stop a search, whichever signal asks: SIGTERM (what `timeout`, Slurm, Kubernetes and systemd send)
and SIGHUP (the terminal closed) take the path Ctrl-C takes. Ray's driver turns SIGTERM into `sys.exit` in the
middle of Tune's loop, which ends in a SIGABRT and a native crash dump; here it asks Tune to stop as Ctrl-C does
(running trials are dropped and FAIL in Optuna, finished ones stay), or raises KeyboardInterrupt where Tune is not
running (the probes), so the study stops cleanly, its local Ray ends, and it says how to resume. The exit status is
128 + the signal: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP. A signal the user's shell ignores (`nohup`
ignores SIGHUP) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

STOPS = (signal.SIGTERM, signal.SIGHUP)  # beside SIGINT, which is Ctrl-C's own


class StopSignals:
    """Installed for the whole search; `install()` again after Ray starts (ray.init sets its own SIGTERM handler)."""

    def __init__(self) -> None:
        self.received: int = signal.SIGINT  # what stopped the search, when something did
        self._saved: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOPS:
            current = signal.getsignal(sig)
            if sig in self._saved and self._saved[sig] is signal.SIG_IGN:
                continue  # ignored when the search began (nohup): left so
            if sig not in self._saved and current is signal.SIG_IGN:
                self._saved[sig] = current
                continue
            previous = signal.signal(sig, self._on_signal)
            self._saved.setdefault(sig, previous)

    def restore(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)  # None: one set outside Python
        self._saved.clear()

    @property
    def exit_code(self) -> int:
        return 128 + int(self.received)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received = signum
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not signal.default_int_handler:
            handler(signal.SIGINT, frame)  # Tune's Ctrl-C handler: end the run, keep what finished
        else:
            raise KeyboardInterrupt
