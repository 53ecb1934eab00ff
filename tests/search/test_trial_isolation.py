"""Every trial of a study runs in a process of its own, forked for it from its Ray trial process's fork server
(tuner.search._fresh), the user's default environment included, with nothing left from the trial before; the
servers end with the study (issue 55)."""

from __future__ import annotations

import json
import platform
import sys
import time

import pytest

from tests.helpers.studies import load_trials
from tests.helpers.userworkloads import GOOD, MAPS_8MB_LOSS, write
from tests.helpers.searchproc import running

# The planted user workload: each trial's evaluate() writes, beside its grid, its process, its parent (the fork
# server), its grandparent (the Ray trial process) and that one's command line, and what a module global holds of
# the trials that ran before it in the same process; and where the process's one-time warm-up ran (the server's
# WARMED) and how many warm-ups of a trial's workload its process has run (warm_process's).
WHERE = GOOD + '''

_LEFT = []  # what a trial leaves in its process: the next trial in the same process would find it here
_evaluate = evaluate


def evaluate(models, val_batches):
    import json, os
    ctx = tuner.trial_context()
    if not ctx.preflight and ctx.out_dir is not None:
        _LEFT.append(str(ctx.out_dir))
        parent = os.getppid()
        with open(f"/proc/{parent}/stat") as f:
            actor = int(f.read().rsplit(") ", 1)[1].split()[1])
        with open(f"/proc/{actor}/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace")
        from tuner.search import _fresh_server, _trial
        with open(os.path.join(str(ctx.out_dir), "where.json"), "w") as f:
            json.dump({"pid": os.getpid(), "server": parent, "actor": actor, "actor_cmdline": cmdline,
                       "left": list(_LEFT), "warmed": getattr(_fresh_server, "WARMED", None),
                       "warm_ups": _trial.warm_process.cache_info().misses}, f)
    return _evaluate(models, val_batches)
'''

SPACE = """
description: two trials of one reused Ray trial process
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 64}, trials: 2}
objectives: [{metric: throughput, direction: max}]
params:
  batch_size: {type: categorical, choices: [16, 32]}
  num_workers: 0
trial: {measure: {warmup_steps: 1, windows: 2, window_min_steps: 1}}
"""



@pytest.mark.ray
def test_each_trial_at_the_users_default_runs_in_a_fresh_process_of_its_own_and_its_server_ends_with_the_study(
        ray_session, tmp_path, space_search, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a CPU host, where trials are forked (a GPU host: interpreters)
    work = write(tmp_path / "proj", WHERE)
    code, _, err, _, reports = space_search.run(
        SPACE, "--workload", f"{work}:make", "--study", "iso", "--confirm", "0", "--no-probe", "--parity-seconds",
        "0", "--concurrency", "1", name="iso.yaml")
    assert code == 0, err
    records = load_trials(reports / "iso")
    assert len(records) == 2 and all(r["state"] == "complete" for r in records), records
    assert all("OMP_WAIT_POLICY" not in r["environment"]["variables"] for r in records)  # the user's default
    seen = [json.loads(p.read_text()) for p in sorted((reports / "iso" / "trials").glob("*/where.json"))]
    assert len(seen) == 2
    one, two = seen
    assert one["pid"] != two["pid"]  # a process of its own each
    assert one["actor"] == two["actor"] and one["actor_cmdline"].startswith("ray::")  # one reused Ray actor
    assert one["actor"] not in (one["pid"], two["pid"])  # which trained neither
    assert one["server"] == two["server"]  # both forked from the one server for the user's environment
    assert [len(s["left"]) for s in seen] == [1, 1]  # nothing of the trial before reached the next
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and running(one["server"]):
        time.sleep(0.2)
    assert not running(one["server"]), "the fork server outlived its study"


@pytest.mark.ray
def test_the_warm_up_runs_once_in_the_fork_server_and_no_trial_repeats_it(ray_session, tmp_path, space_search,
                                                                          monkeypatch):
    """Each forked child paid the trial's warm-up (the workload built, a step, an evaluation: ~0.7 s a trial on a
    quiet CPU) that the trials sharing a process had paid once (issue 55): the server pays torch's and tuner's
    one-time costs once, before its first fork, and its children inherit them instead of running a warm-up."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a CPU host, where trials are forked
    work = write(tmp_path / "proj", WHERE)
    code, _, err, _, reports = space_search.run(
        SPACE, "--workload", f"{work}:make", "--study", "warm", "--confirm", "0", "--no-probe", "--parity-seconds",
        "0", "--concurrency", "1", name="warm.yaml")
    assert code == 0, err
    seen = [json.loads(p.read_text()) for p in sorted((reports / "warm" / "trials").glob("*/where.json"))]
    assert len(seen) == 2 and seen[0]["pid"] != seen[1]["pid"] and seen[0]["server"] == seen[1]["server"]
    for trial in seen:
        assert trial["warmed"] == {"pid": trial["server"], "runs": 1}  # in the server, once, for both trials
        assert trial["warm_ups"] == 0  # the child ran no warm-up of its own (tuner.search._trial.warm_process)


@pytest.mark.ray
@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_a_trials_allocator_starts_as_a_fresh_process_not_as_the_servers_warm_up_left_it(
        ray_session, tmp_path, space_search, monkeypatch):
    """glibc's malloc raises its mmap threshold to the largest block a process frees, and forked trials inherit
    the server's: its warm-up at the CNN's default batch freed 8-16 MB blocks, so every trial kept its step's
    tensors on the heap and read 10-15% above the user's own fresh process (issue 58). The warm-up is tiny now."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a CPU host, where trials are forked
    log = tmp_path / "steps.jsonl"
    # Ray's trial processes started before this test: the log's path travels in the workload's source
    work = write(tmp_path / "proj", GOOD + f"\nimport os\nos.environ['PLANT_LOG'] = {str(log)!r}\n" + MAPS_8MB_LOSS + '''

_make = make


def make(hidden=8):
    import dataclasses
    return dataclasses.replace(_make(hidden), loss=loss)
''')
    code, _, err, _, _ = space_search.run(
        SPACE, "--workload", f"{work}:make", "--study", "malloc", "--confirm", "0", "--no-probe",
        "--parity-seconds", "0", "--concurrency", "1", name="malloc.yaml")
    assert code == 0, err
    firsts = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(firsts) >= 3, firsts  # the study's pre-flight, then a process of its own for each trial
    assert all(s["step_maps_8mb"] for s in firsts[-2:]), firsts
