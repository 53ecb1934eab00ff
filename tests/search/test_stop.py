"""SIGTERM and SIGHUP stop a search as Ctrl-C does (tuner.search._stop): in the probes, where Tune is not running,
as a KeyboardInterrupt; the exit status says which signal; a signal the shell ignores (nohup) stays ignored."""

from __future__ import annotations

import os
import signal

import pytest

from tuner.search._stop import StopSignals


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stop_signal_interrupts_as_ctrl_c_and_its_exit_status_names_it(sig, code):
    # not ignored when the search began (under `nohup pytest` SIGHUP is, and then stays ignored: the next test)
    before = signal.signal(sig, signal.SIG_DFL)
    # Python's own SIGINT handler, as in a fresh `tuner search` before Tune starts: a Tune run earlier in this
    # pytest process can leave its own Ctrl-C handler installed, which the stop signal would then call instead
    interrupt = signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = StopSignals()
    stop.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)  # the handler runs before the next line
            pytest.fail("no KeyboardInterrupt")
        assert stop.exit_code == code
    finally:
        stop.restore()
        signal.signal(signal.SIGINT, interrupt)
    assert signal.getsignal(sig) == signal.SIG_DFL  # put back as it was when the search began
    signal.signal(sig, before)


def test_a_signal_ignored_when_the_search_began_stays_ignored():
    """`nohup tuner search ...` ignores SIGHUP: closing the terminal must not stop the study."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        stop = StopSignals()
        stop.install()
        stop.install()  # again after Ray starts
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)  # nothing happens
        assert stop.exit_code == 130  # still Ctrl-C's, what nothing stopped reads
        assert signal.getsignal(signal.SIGTERM) == stop._on_signal
        stop.restore()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
