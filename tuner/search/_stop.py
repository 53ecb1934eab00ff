"""One way to stop a search, whichever signal asks: SIGTERM (what `timeout`, Slurm, Kubernetes and systemd send)
takes the path Ctrl-C takes. Ray's driver turns SIGTERM into `sys.exit` in the middle of Tune's loop, which ends
in a SIGABRT and a native crash dump; here it asks Tune to stop as Ctrl-C does (running trials are dropped and
FAIL in Optuna, finished ones stay), or raises KeyboardInterrupt where Tune is not running (the probes), so the
study stops cleanly and says how to resume. The exit status is 128 + the signal: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class StopSignals:
    """Installed for the whole search; `install()` again after Ray starts (ray.init sets its own handler)."""

    def __init__(self) -> None:
        self.received: int = signal.SIGINT  # what stopped the search, when something did
        self._saved: Any = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        if self._saved is None:
            self._saved = previous

    def restore(self) -> None:
        if self._saved is not None:
            signal.signal(signal.SIGTERM, self._saved)
            self._saved = None

    @property
    def exit_code(self) -> int:
        return 128 + int(self.received)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.received = signal.SIGTERM
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not signal.default_int_handler:
            handler(signal.SIGINT, frame)  # Tune's Ctrl-C handler: end the run, keep what finished
        else:
            raise KeyboardInterrupt
