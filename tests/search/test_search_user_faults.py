"""`tuner search` as a real process, with its own Ray shipping the user's file to the workers: `--verbose --format
json` prints exactly one JSON document on stdout (Ray's status tables and logs go to stderr), and an exception in
the user's code names the user's own file in the recorded traceback, not Ray's shipped copy (`_ray_pkg_<hash>`)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers.searchproc import finish
from tests.helpers.studies import load_trials
from tests.helpers.userworkloads import HEADER, write

# Raises inside the trial only (the pre-flight check passes), as a bug that some runs meet.
RAISES_IN_TRIAL = HEADER + '''

def user_loss(models, batch):
    if not tuner.trial_context().preflight:
        raise ValueError("only in the trial")
    return F.cross_entropy(models["net"](batch[0]), batch[1])


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=user_loss)
'''

SPACE = """
description: one trial of a user's workload
defaults: {budget: {samples: 64}, trials: 1}
objectives:
  default: [{metric: throughput, direction: max}]
trial: {quality: {enabled: false}, measure: {warmup_steps: 1, windows: 2}}
params:
  batch_size: {type: categorical, choices: [8, 16]}
  num_workers: 0
  precision: fp32
"""


@pytest.mark.ray
def test_verbose_json_is_one_document_and_the_traceback_names_the_users_file(tmp_path, space_search):
    work = write(tmp_path / "proj", RAISES_IN_TRIAL, "mine.py")
    proc, reports = space_search.start(SPACE, "--workload", f"{work}:make", "--study", "faults", "--confirm", "0",
                                       "--no-probe", "--verbose", "--format", "json", name="one.yaml")
    out, err = finish(proc, timeout=300)
    assert proc.returncode == 0, err[-3000:]
    doc = json.loads(out)  # fails if Ray's tables or logs came first
    assert doc["study"] == "faults" and doc["states"] == {"error": 1}
    (record,) = load_trials(reports / "faults")
    assert record["state"] == "error" and "only in the trial" in record["error"]
    assert str(work) in record["error"] and "_ray_pkg_" not in record["error"]
    assert f'File "{work}"' in record["traceback"] and "_ray_pkg_" not in record["traceback"]


LOOPS_IN_TRIAL_FACTORY = HEADER + '''

def make():
    import time
    while not tuner.trial_context().preflight:  # the pre-flight check passes; the trial's factory never returns
        time.sleep(0.05)
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
'''


@pytest.mark.ray
def test_a_trials_factory_that_never_returns_is_an_error_trial_not_a_hung_study(ray_session, tmp_path,
                                                                                 space_search):
    work = write(tmp_path / "proj", LOOPS_IN_TRIAL_FACTORY, "loops.py")
    code, _, err, _, reports = space_search.run(SPACE.replace("trial: {", "trial: {setup_timeout_s: 2, "),
                                                "--workload", f"{work}:make", "--study", "stuck", "--confirm", "0",
                                                "--no-probe", name="one.yaml")
    assert code == 2, err  # the study ends on the set-up timeout's line, not in a hang
    (record,) = load_trials(reports / "stuck")
    assert record["state"] == "error"
    assert "the workload factory make() did not return within 2 s (setup_timeout_s" in record["error"]
    assert str(work) in record["error"]


# Blocks in every process but the test's own (the driver's pre-flight passes): as a factory that waits on something
# only the trial's process meets.
BLOCKS_OUTSIDE_THE_DRIVER = HEADER + '''

def make():
    import os
    import time
    while os.getpid() != {pid}:
        time.sleep(0.05)
    return tuner.Workload(models={{"net": lambda: nn.Linear(4, 2)}}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
'''


@pytest.mark.ray
def test_a_set_up_timeout_ends_the_search_instead_of_waiting_as_long_in_every_trial(ray_session, tmp_path,
                                                                                     space_search):
    import os

    work = write(tmp_path / "proj", BLOCKS_OUTSIDE_THE_DRIVER.replace("{pid}", str(os.getpid())).replace("{{", "{")
                 .replace("}}", "}"), "hangs.py")
    out = space_search.run(SPACE.replace("trial: {", "trial: {setup_timeout_s: 2, ").replace("trials: 1", "trials: 3"),
                           "--workload", f"{work}:make", "--study", "hangs", "--confirm", "0", "--no-probe",
                           name="three.yaml")
    code, reports = out.code, out.reports
    assert code == 2, out.err  # as a set-up timeout in the probes: the user's to fix, not a clean end
    assert out.err.strip().splitlines()[-1].startswith("tuner: error: trial 0: the workload factory make() did not")
    (record,) = load_trials(reports / "hangs")  # not three trials, each waiting the whole timeout
    assert record["state"] == "error"
    assert "the workload factory make() did not return within 2 s (setup_timeout_s" in record["error"]
    assert str(work) in record["error"]
    assert "no further trial started" in out.out + out.err
    # the line names the factory and the seconds it waited, not only the setting
    assert "trial 0: the workload factory make() did not return within 2 s" in out.out + out.err


# Keeps a thread pool alive for the whole process (a library's, torch.compile's inductor's): in the driver (its
# pre-flight builds the workload) and in each confirmation re-run's child.
KEEPS_A_POOL = HEADER + '''

import concurrent.futures

POOL = concurrent.futures.ThreadPoolExecutor(2)


def make():
    POOL.submit(lambda: 1).result()
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
'''


@pytest.mark.ray
def test_a_study_of_a_workload_that_keeps_a_thread_pool_ends_with_its_reruns(tmp_path, space_search):
    """The driver and each re-run's child end through tuner.files.fast_exit, which joined the pool's idle workers
    before Python's exit callbacks that tell them to stop: the re-runs waited until the driver's cap, and the
    driver forever after its summary (issue 57)."""
    work = write(tmp_path / "proj", KEEPS_A_POOL, "pooled.py")
    proc, reports = space_search.start(SPACE.replace("trials: 1", "trials: 2"), "--workload", f"{work}:make",
                                       "--study", "pooled", "--confirm", "1", "--repeats", "1", "--no-probe",
                                       "--parity-seconds", "0", "--format", "json", name="one.yaml")
    out, err = finish(proc, timeout=400)
    assert proc.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["study"] == "pooled" and doc["states"] == {"complete": 2}
    reruns = sorted((reports / "pooled" / "trials").glob("*/confirm/*.json"))
    assert reruns and all(json.loads(p.read_text())["state"] == "complete" for p in reruns)
    assert "not waiting for thread" not in err


# Blocks outside the pre-flight (the probes, the trials) for two minutes: long past the 2 s set-up timeout, yet
# finite, so a regression fails instead of hanging the suite.
BLOCKS_OUTSIDE_THE_PREFLIGHT = HEADER + '''

def make():
    import time
    end = time.monotonic() + 120
    while not tuner.trial_context().preflight and time.monotonic() < end:
        time.sleep(0.05)
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
'''


@pytest.mark.ray
@pytest.mark.parametrize("where", ["the loader probes", "the numerics parity check"])
def test_a_factory_that_blocks_in_the_probes_ends_the_study_with_one_line_naming_it(ray_session, tmp_path,
                                                                                   space_search, where):
    """The probes called the factory with no set-up timeout: a factory that blocks only outside the pre-flight held
    a study at 'probing loader knobs' for 15 minutes (issue 57). It is bounded there as in a trial (and in the
    parity check), and the first time the bound runs out the study ends, with one line naming the factory and the
    seconds it waited."""
    work = write(tmp_path / "proj", BLOCKS_OUTSIDE_THE_PREFLIGHT, "blocks.py")
    text = SPACE.replace("trial: {", "trial: {setup_timeout_s: 2, ").replace("trials: 1", "trials: 2")
    if where == "the loader probes":
        text, more = text.replace("num_workers: 0", "num_workers: {type: categorical, choices: [0, 1]}"), \
            ["--parity-seconds", "0"]
    else:
        text, more = text.replace("precision: fp32", "precision: {type: categorical, choices: [fp32, bf16]}"), \
            ["--no-probe"]
    out = space_search.run(text, "--workload", f"{work}:make", "--study", "probed", "--confirm", "0", *more,
                           name="probed.yaml")
    code, reports = out.code, out.reports
    assert code == 2, out.err
    (line,) = [ln for ln in out.err.splitlines() if ln.startswith("tuner: error:")]
    assert "the workload factory make() did not return within 2 s (setup_timeout_s" in line
    assert f"in {where}: the study ends here" in line
    assert load_trials(reports / "probed") == []  # no trial waited on the same hang


# Blocks only in a confirmation re-run's process (forked from tuner.search._fresh's server), for two minutes.
BLOCKS_IN_RERUNS = HEADER + '''

def make():
    # Every search trial and re-run is a child of tuner's fork server, so a re-run is told apart by counting: the
    # study's 2 search trials are the server's first 2 children to build the workload, a re-run comes after them
    # (the pre-flight builds it in the driver, not under the server).
    import fcntl
    import os
    import pathlib
    import time
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        forked = b"tuner.search._fresh" in f.read()
    in_rerun = False
    if forked:
        with open(pathlib.Path(__file__).with_name("calls"), "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            calls = len(f.read()) + 1
            f.write("x")
        in_rerun = calls > 2
    end = time.monotonic() + 120
    while in_rerun and time.monotonic() < end:
        time.sleep(0.05)
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
'''


@pytest.mark.ray
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the planted factory reads /proc")
def test_a_set_up_timeout_in_a_rerun_starts_no_further_rerun(ray_session, tmp_path, space_search):
    """Each re-run waited the whole setup_timeout_s on the same hang; the first one ends the confirmation, with the
    line naming the factory and the seconds, and --resume runs the re-runs left. The study ends on that line (exit
    2, as a set-up timeout in the probes), not as a search stopped by a signal: it said "interrupted" and exited 130
    (its confirmation had not run to its end)."""
    work = write(tmp_path / "proj", BLOCKS_IN_RERUNS, "reruns.py")
    out = space_search.run(SPACE.replace("trial: {", "trial: {setup_timeout_s: 2, ").replace("trials: 1", "trials: 2"),
                           "--workload", f"{work}:make", "--study", "reruns", "--confirm", "1", "--repeats", "2",
                           "--no-probe", "--parity-seconds", "0", name="two.yaml")
    code, reports = out.code, out.reports
    assert code == 2, out.err
    last = out.err.strip().splitlines()[-1]
    assert last.startswith("tuner: error: trial ") and "re-run: the workload factory make() did not return within " \
        "2 s" in last, out.err
    assert "interrupted" not in out.out + out.err and "search stopped after" not in out.err
    reruns = sorted((reports / "reruns" / "trials").glob("*/confirm/*.json"))
    assert len(reruns) == 1, out.err  # not every re-run waiting as long
    assert "the workload factory make() did not return within 2 s" in json.loads(reruns[0].read_text())["error"]
    assert "re-run: the workload factory make() did not return within 2 s" in out.out + out.err
    assert "no further re-run started" in out.out + out.err
