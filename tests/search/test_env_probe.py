"""The OpenMP wait policy as a probed speed knob (issue 58): each value read in a process started under it (libgomp
reads the variable once, when torch loads; one server per value forks its readings, issue 55), the rule that keeps
a value only where it beats the user's own environment, a policy the user set kept as theirs, and a study whose
trials train under what the probe chose while its baseline trains in the user's environment."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.fakes import ceilings_on_a_ticking_clock
from tests.helpers.searchproc import running
from tests.helpers.studies import load_trials
from tests.helpers.userworkloads import write
from tuner.config import SPEED_ENV
from tuner.search import _env_probe
from tuner.search._env_probe import probe_env, read_value, user_set


@pytest.fixture
def no_policy(monkeypatch):
    """No wait policy or malloc setting of the user's in this process (one would be kept, not probed)."""
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "MALLOC_MMAP_THRESHOLD_",
                "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", "LD_PRELOAD"):
        monkeypatch.setenv(key, "placeholder")
        monkeypatch.delenv(key)


def roomy(cache_dir="c", trials=12, seconds=600.0, study_seconds=None):
    """The probes' view of a study (SearchPlan's fields they read): by default one whose training (12 trials of
    600 s) leaves the env probes their share."""
    from types import SimpleNamespace

    from tuner.config import Budget
    from tuner.study import Preflight

    return SimpleNamespace(cache_dir=cache_dir, trials=trials, budget=Budget(seconds=seconds), preflight=Preflight(),
                           options=SimpleNamespace(study_seconds=study_seconds))


def env_probes_always(monkeypatch):
    """A tiny study's env probes run anyway (their cost against the study's training is tested apart): these tests
    are about what a study does with the probe's choice."""
    monkeypatch.setattr(_env_probe, "too_short", lambda todo, plan: None)


def planted(rates):
    """A reader that returns `rates[value]` in turn (a list: one per reading), recording the order read."""
    order = []

    def reader(knob, value, cfg_json, seconds, cache_dir, threads):
        order.append(value)
        got = rates[value]
        return got.pop(0) if isinstance(got, list) else got
    return reader, order


def probe_policy(rates):
    reader, order = planted(rates)
    return probe_env("omp_wait_policy", ["default", "PASSIVE", "ACTIVE"], 64, "{}", 0.75, "c", 2, reader=reader), order


def test_a_policy_is_kept_only_where_it_beats_the_users_own_environment_in_both_rounds():
    probe, order = probe_policy({"default": [1000.0, 1010.0], "PASSIVE": 700.0, "ACTIVE": [1400.0, 1380.0]})
    assert probe.chosen == {"omp_wait_policy": "ACTIVE"}
    assert order == ["default", "PASSIVE", "ACTIVE", "ACTIVE", "default"]  # what beat default, then default again
    assert "ACTIVE chosen" in probe.why and "x1.37 over default in both rounds" in probe.why  # the lower round's gain

    probe, order = probe_policy({"default": [1000.0, 1000.0], "PASSIVE": [1100.0, 1200.0], "ACTIVE": [1300.0, 1060.0]})
    assert order == ["default", "PASSIVE", "ACTIVE", "ACTIVE", "PASSIVE", "default"]  # both beat it: reverse order
    assert probe.chosen == {"omp_wait_policy": "PASSIVE"}  # its lower round x1.10, ACTIVE's x1.06


def test_one_low_reading_of_the_default_does_not_choose_a_policy():
    """The twenty-ninth session's probe: default 1324, PASSIVE 1379, ACTIVE 1808 samples/s read once each chose
    ACTIVE (x1.36); full runs then read default and ACTIVE equal. Read again, default catches up: nothing is set."""
    probe, order = probe_policy({"default": [1324.0, 1800.0], "PASSIVE": 1379.0, "ACTIVE": [1808.0, 1790.0]})
    assert order == ["default", "PASSIVE", "ACTIVE", "ACTIVE", "default"]
    assert probe.chosen == {} and probe.why.startswith("default (yours) kept")
    assert "in both rounds" in probe.why and "default 1324/1800" in probe.why and "ACTIVE 1808/1790" in probe.why


def test_values_within_noise_of_the_default_cost_one_reading_each():
    """Nothing beats default's first reading by 5%: a second round could not choose anything, and is not read."""
    probe, order = probe_policy({"default": [1000.0, 1030.0], "PASSIVE": 600.0, "ACTIVE": [1040.0, 1000.0]})
    assert order == ["default", "PASSIVE", "ACTIVE"]
    assert probe.chosen == {} and probe.why.startswith("default (yours) kept")
    assert probe.readings == {"default": [1000.0], "PASSIVE": [600.0], "ACTIVE": [1040.0]}
    assert "in both rounds" not in probe.why


def test_an_unread_default_sets_nothing():
    reader, _ = planted({"default": None, "PASSIVE": 900.0, "ACTIVE": 1200.0})
    probe = probe_env("omp_wait_policy", ["PASSIVE", "ACTIVE"], 32, "{}", 0.75, "c", 1, reader=reader)
    assert probe.chosen == {} and "not read" in probe.why


def test_a_wait_policy_the_user_set_is_theirs():
    assert user_set("omp_wait_policy", {"OMP_WAIT_POLICY": "passive"}) == "OMP_WAIT_POLICY=passive"
    assert user_set("omp_wait_policy", {"GOMP_SPINCOUNT": "0"}) == "GOMP_SPINCOUNT=0"
    assert user_set("omp_wait_policy", {"PATH": "/bin"}) is None


SEES_POLICY = '''
import os
from pathlib import Path

import tuner


def make():
    Path(os.environ["TUNER_TEST_SEEN"]).write_text(os.environ.get("OMP_WAIT_POLICY", "unset"))
    raise RuntimeError("seen")
'''


def test_each_value_is_read_in_a_process_of_its_own_under_that_environment(tmp_path, monkeypatch):
    path = write(tmp_path, SEES_POLICY, name="seespolicy.py")
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("TUNER_TEST_SEEN", str(seen))
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    cfg = '{"workload": "%s:make", "params": {"device": "cpu"}}' % path
    assert read_value("omp_wait_policy", "PASSIVE", cfg, 0.5, str(tmp_path / "c"), 1) is None  # its make() raised
    assert seen.read_text() == "PASSIVE"
    read_value("omp_wait_policy", "default", cfg, 0.5, str(tmp_path / "c"), 1)
    assert seen.read_text() == "unset"  # default: the environment as the user has it, nothing set


def reads_its_policy(job):
    """Planted reading (pickled by value into the forked child): notes its process, its server and the policy each
    had when it started (the server's at its exec: what libgomp read when it loaded torch); a rate per policy."""
    raw = open(f"/proc/{os.getppid()}/environ", "rb").read().decode(errors="replace").split("\0")
    server = dict(kv.split("=", 1) for kv in raw if "=" in kv).get("OMP_WAIT_POLICY", "unset")
    policy = os.environ.get("OMP_WAIT_POLICY", "unset")
    with open(os.environ["TUNER_TEST_SEEN"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "server": os.getppid(), "policy": policy, "at_load": server}) + "\n")
    return {"compute": {"unset": 1000.0, "PASSIVE": 600.0, "ACTIVE": 1080.0}[policy]}


def test_each_value_is_read_in_children_of_one_server_started_under_it_and_the_probe_still_decides(
        tmp_path, monkeypatch, no_policy):
    """A fresh interpreter per reading loaded torch five times (25 s before the default study's first trial): now
    one server per value loads it once, each reading a forked process of its own, and the servers end with the
    probe."""
    import sys

    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the child cannot import a test module
    seen = tmp_path / "seen.jsonl"
    monkeypatch.setenv("TUNER_TEST_SEEN", str(seen))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the CPU, where readings are forked
    monkeypatch.setattr(_env_probe, "read_here", reads_its_policy)
    probe = probe_env("omp_wait_policy", ["default", "PASSIVE", "ACTIVE"], 64, "{}", 0.5, str(tmp_path / "c"), 1)
    assert probe.chosen == {"omp_wait_policy": "ACTIVE"} and "x1.08 over default" in probe.why
    reads = [json.loads(line) for line in seen.read_text().splitlines()]
    assert [r["policy"] for r in reads] == ["unset", "PASSIVE", "ACTIVE", "ACTIVE", "unset"]  # interleaved as before
    assert all(r["policy"] == r["at_load"] for r in reads)  # each under its value when torch loaded
    assert len({r["pid"] for r in reads}) == 5  # a process of its own per reading
    assert reads[0]["server"] == reads[4]["server"] and reads[2]["server"] == reads[3]["server"]
    assert len({r["server"] for r in reads}) == 3  # one server per value
    assert not any(running(r["server"]) for r in reads)  # ended with the probe



SPACE = """
description: env probe study
defaults: {workload: cnn, dataset: synthetic, workload_options: {image_size: 16}, budget: {samples: 96}, trials: 2}
objectives: [{metric: throughput, direction: max}]
params:
  batch_size: 32
  omp_wait_policy: {type: categorical, choices: [default, PASSIVE, ACTIVE], when: {gpus: "==0"}}
trial: {measure: {warmup_steps: 1, windows: 2, window_min_steps: 1}, quality: {enabled: false}}
"""


@pytest.mark.parametrize("faster", ["ACTIVE"])
def test_a_study_trains_every_trial_but_the_baseline_under_the_policy_its_probe_chose(
        ray_session, tmp_path, capsys, monkeypatch, faster, no_policy, space_search):
    for key in SPEED_ENV:  # no speed variable of this shell's (a CI host's OMP_NUM_THREADS) but the one planted
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "2")  # a speed variable of the user's own: recorded in study.json
    env_probes_always(monkeypatch)
    ceilings_on_a_ticking_clock(monkeypatch, "tuner.train.probe")  # a compute reading at any load
    rates = {"default": 1000.0, "PASSIVE": 500.0, "ACTIVE": 1500.0}
    monkeypatch.setattr(_env_probe, "read_value", lambda knob, value, *a: rates[value])
    code, _, err, _, reports = space_search.run(SPACE, "--study", "e", "--confirm", "0", "--parity-seconds", "0",
                                                name="env.yaml")
    assert code == 0, err
    assert "probing omp_wait_policy (default, PASSIVE, ACTIVE)" in err and f"{faster} chosen" in err
    records = {r["trial"]: r for r in load_trials(reports / "e")}
    assert records[0]["params"].get("omp_wait_policy", "default") == "default"
    assert "OMP_WAIT_POLICY" not in records[0]["environment"]["variables"]  # the baseline: the user's environment
    assert records[1]["params"]["omp_wait_policy"] == faster
    assert records[1]["environment"]["variables"]["OMP_WAIT_POLICY"] == faster  # set before its torch loaded
    assert "OMP_WAIT_POLICY" not in os.environ  # the driver's own environment: untouched
    meta = json.loads((reports / "e" / "study.json").read_text())
    assert meta["machine"]["environment"] == {"MKL_NUM_THREADS": "2"}


def test_a_policy_is_not_probed_where_the_baselines_batch_gave_no_reading_and_the_trials_search_it(monkeypatch,
                                                                                                   no_policy):
    """A step too slow for a probe reading (a ResNet on 2 busy cores) read nothing in three fresh processes (51 s):
    now none is started, and the trials search the knob, as they do a speed knob no batch size could read."""
    from types import SimpleNamespace

    from tuner.search._env_probe import probe_environment
    from tuner.space import parse_space
    from tuner.study import ProbeChoice, ProbePlan
    import yaml

    space = parse_space(yaml.safe_load(SPACE), source="env.yaml", name="env")
    started = []
    monkeypatch.setattr(_env_probe, "read_value", lambda *a: started.append(a) or 1000.0)
    plan = ProbePlan(knobs=["omp_wait_policy"], choices=[ProbeChoice(batch_size=32, compute_ceiling=None)])
    out = probe_environment(plan, roomy(), space, {"cpus": 2, "gpus": 0, "device": "cpu"},
                            {}, SimpleNamespace(cpus_per_process=2), None, True, 0.75)
    assert started == [] and out.environments == []
    assert "omp_wait_policy" in out.unread and "omp_wait_policy" not in out.knobs


def test_malloc_retain_is_kept_only_where_it_beats_the_allocator_as_the_user_has_it():
    """glibc's allocator is probed like the wait policy: `retain` only where its reading beats default's by 5%."""
    reader, order = planted({"default": 1000.0, "retain": 1150.0})
    probe = probe_env("malloc", ["default", "retain"], 64, "{}", 0.75, "c", 2, reader=reader)
    assert probe.chosen == {"malloc": "retain"} and order == ["default", "retain", "retain", "default"]
    assert "retain chosen" in probe.why and "x1.15 over default" in probe.why
    reader, order = planted({"default": [1000.0, 1010.0], "retain": [1030.0, 1020.0]})
    probe = probe_env("malloc", ["default", "retain"], 64, "{}", 0.75, "c", 2, reader=reader)
    assert probe.chosen == {} and order == ["default", "retain"]
    reader, order = planted({"default": [1000.0, None], "retain": [1150.0, 1150.0]})  # default's second failed
    probe = probe_env("malloc", ["default", "retain"], 64, "{}", 0.75, "c", 2, reader=reader)
    assert probe.chosen == {} and order == ["default", "retain", "retain", "default"]  # not beaten twice: kept


def test_a_malloc_setting_the_user_made_is_theirs():
    assert user_set("malloc", {"MALLOC_TRIM_THRESHOLD_": "0"}) == "MALLOC_TRIM_THRESHOLD_=0"
    assert user_set("malloc", {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}) == "LD_PRELOAD=/usr/lib/libjemalloc.so.2"
    assert user_set("malloc", {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}) is not None
    assert user_set("malloc", {"LD_PRELOAD": "libprofiler.so", "GLIBC_TUNABLES": "glibc.pthread.x=1"}) is None
    assert user_set("malloc", {"OMP_WAIT_POLICY": "PASSIVE"}) is None  # the wait policy's, not malloc's


WAIT_LINE = '  omp_wait_policy: {type: categorical, choices: [default, PASSIVE, ACTIVE], when: {gpus: "==0"}}\n'
MALLOC_LINE = '  malloc: {type: categorical, choices: [default, retain], when: {gpus: "==0"}}\n'
BOTH = SPACE.replace(WAIT_LINE, WAIT_LINE + MALLOC_LINE)


class Said:
    """A console that keeps what is printed."""

    def __init__(self):
        self.lines = []

    def print(self, text, **kw):
        self.lines.append(text)


def _probe_both(monkeypatch, rates):
    from types import SimpleNamespace

    import yaml

    from tuner.search._env_probe import probe_environment
    from tuner.space import parse_space
    from tuner.study import ProbeChoice, ProbePlan

    assert "malloc:" in BOTH
    space = parse_space(yaml.safe_load(BOTH), source="env.yaml", name="env")
    reads = []

    def read_value(knob, value, cfg, seconds, cache, threads, servers=None, under=None):
        reads.append((knob, value, dict(under or {})))
        return rates[value]
    monkeypatch.setattr(_env_probe, "read_value", read_value)
    plan = ProbePlan(knobs=["omp_wait_policy", "malloc"], choices=[ProbeChoice(batch_size=32, compute_ceiling=900.0)])
    said = Said()
    out = probe_environment(plan, roomy(), space, {"cpus": 2, "gpus": 0, "device": "cpu"},
                            {}, SimpleNamespace(cpus_per_process=2), said, True, 0.75)
    return out, reads, said.lines


def test_malloc_is_probed_after_the_wait_policy_under_what_it_chose_and_both_choices_reach_the_trials(
        monkeypatch, no_policy):
    import tuner.knobs

    monkeypatch.setattr(tuner.knobs, "glibc", lambda: True)
    out, reads, said = _probe_both(monkeypatch, {"default": 1000.0, "PASSIVE": 600.0, "ACTIVE": 1200.0,
                                                 "retain": 1200.0 * 1.1})
    assert [p.knob for p in out.environments] == ["omp_wait_policy", "malloc"]
    assert [(k, v) for k, v, _ in reads] == [("omp_wait_policy", "default"), ("omp_wait_policy", "PASSIVE"),
                                            ("omp_wait_policy", "ACTIVE"), ("omp_wait_policy", "ACTIVE"),
                                            ("omp_wait_policy", "default"), ("malloc", "default"), ("malloc", "retain"),
                                            ("malloc", "retain"), ("malloc", "default")]
    assert all(under == {} for k, _, under in reads if k == "omp_wait_policy")
    assert all(under == {"OMP_WAIT_POLICY": "ACTIVE"} for k, _, under in reads if k == "malloc")
    assert out.loader_for(32) == {"omp_wait_policy": "ACTIVE", "malloc": "retain"}
    assert any(line.startswith("probing malloc (default, retain) at batch 32") and "(read once, when python starts), "
               "under OMP_WAIT_POLICY=ACTIVE: one reading each; default and any value more than 5% faster read "
               "again, in reverse order ..." in line for line in said), said
    assert "omp_wait_policy ACTIVE" in out.describe() and "malloc retain" in out.describe()
    again = type(out).model_validate_json(out.model_dump_json())  # probes.json round trip
    assert again.loader_for(32) == out.loader_for(32)
    old = {"knobs": [], "choices": [], "environment": out.environments[0].model_dump()}  # a probes.json of before
    assert type(out).model_validate(old).env_probe("omp_wait_policy") is not None


def test_without_glibc_malloc_is_not_probed_and_says_so(monkeypatch, no_policy):
    import tuner.knobs

    monkeypatch.setattr(tuner.knobs, "glibc", lambda: False)
    out, reads, said = _probe_both(monkeypatch, {"default": 1000.0, "PASSIVE": 600.0, "ACTIVE": 900.0})
    assert {k for k, _, _ in reads} == {"omp_wait_policy"}
    assert [p.knob for p in out.environments] == ["omp_wait_policy"]
    assert any(line.strip().startswith("malloc: not probed, no glibc here") for line in said), said
    assert "malloc" not in out.loader_for(32)  # left as the user has it: the trials run at its default


def records_its_malloc(job):
    """Planted reading (pickled by value into the forked child): the malloc thresholds its process and its server
    (at its exec: what glibc read when it started) had."""
    raw = open(f"/proc/{os.getppid()}/environ", "rb").read().decode(errors="replace").split("\0")
    server = dict(kv.split("=", 1) for kv in raw if "=" in kv)
    keys = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    with open(os.environ["TUNER_TEST_SEEN"], "a") as f:
        f.write(json.dumps({"child": {k: os.environ.get(k) for k in keys},
                            "server": {k: server.get(k) for k in keys}}) + "\n")
    return {"compute": 1000.0}


def test_a_process_read_at_retain_has_both_thresholds_from_its_start_and_one_at_default_has_neither(
        tmp_path, monkeypatch, no_policy):
    import sys

    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the child cannot import a test module
    seen = tmp_path / "seen.jsonl"
    monkeypatch.setenv("TUNER_TEST_SEEN", str(seen))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the CPU, where readings are forked
    monkeypatch.setattr(_env_probe, "read_here", records_its_malloc)
    for value in ("retain", "default"):
        assert read_value("malloc", value, "{}", 0.5, str(tmp_path / "c"), 1) == 1000.0
    retain, default = [json.loads(line) for line in seen.read_text().splitlines()]
    want = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}
    assert retain["child"] == retain["server"] == want
    assert set(default["child"].values()) == set(default["server"].values()) == {None}
    assert "MALLOC_MMAP_THRESHOLD_" not in os.environ  # the driver's own: untouched


def probe_both_in_servers(tmp_path, monkeypatch, read_here):
    """Runs the wait-policy and malloc probes for real (fork servers, forked readings) with `read_here` planted
    as every reading (pickled by value into the children, which cannot import a test module); the plan they made
    and what each reading wrote to TUNER_TEST_SEEN."""
    import sys
    from types import SimpleNamespace

    import ray.cloudpickle
    import yaml

    import tuner.knobs
    from tuner.search._env_probe import probe_environment
    from tuner.space import parse_space
    from tuner.study import ProbeChoice, ProbePlan

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    seen = tmp_path / "seen.jsonl"
    monkeypatch.setenv("TUNER_TEST_SEEN", str(seen))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(tuner.knobs, "glibc", lambda: True)
    monkeypatch.setattr(_env_probe, "read_here", read_here)
    space = parse_space(yaml.safe_load(BOTH), source="env.yaml", name="env")
    plan = ProbePlan(knobs=["omp_wait_policy", "malloc"], choices=[ProbeChoice(batch_size=32, compute_ceiling=900.0)])
    out = probe_environment(plan, roomy(str(tmp_path / "c")), space,
                            {"cpus": 2, "gpus": 0, "device": "cpu"}, {}, SimpleNamespace(cpus_per_process=1), None,
                            True, 0.5)
    return out, [json.loads(line) for line in seen.read_text().splitlines()]


def reads_its_environment(job):
    """Planted reading (pickled by value into the forked child): its server and the knobs' variables it had; the
    ACTIVE policy and retain read fastest."""
    keys = ("OMP_WAIT_POLICY", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    env = {k: os.environ.get(k) for k in keys}
    with open(os.environ["TUNER_TEST_SEEN"], "a") as f:
        f.write(json.dumps({"server": os.getppid(), "env": env}) + "\n")
    rate = 1000.0 * (1.2 if env["OMP_WAIT_POLICY"] == "ACTIVE" else 1.0) * (1.1 if env["MALLOC_MMAP_THRESHOLD_"] else 1)
    return {"compute": rate * (0.5 if env["OMP_WAIT_POLICY"] == "PASSIVE" else 1.0)}


def test_the_malloc_probe_costs_one_more_torch_load_its_default_forked_from_the_wait_policys_chosen_server(
        tmp_path, monkeypatch, no_policy):
    """Probing malloc after the wait policy starts one server (retain's, under the chosen policy): its default
    reading is forked from the server the chosen policy was read in; all end with the probes."""
    out, reads = probe_both_in_servers(tmp_path, monkeypatch, reads_its_environment)
    assert out.loader_for(32) == {"omp_wait_policy": "ACTIVE", "malloc": "retain"}
    active = {r["server"] for r in reads if r["env"] == {"OMP_WAIT_POLICY": "ACTIVE", "MALLOC_MMAP_THRESHOLD_": None,
                                                          "MALLOC_TRIM_THRESHOLD_": None}}
    retain = [r for r in reads if r["env"]["MALLOC_MMAP_THRESHOLD_"]]
    assert len(active) == 1  # the policy's readings and malloc's default: one server
    assert retain and all(r["env"] == {"OMP_WAIT_POLICY": "ACTIVE", "MALLOC_MMAP_THRESHOLD_": "33554432",
                                       "MALLOC_TRIM_THRESHOLD_": "268435456"} for r in retain)
    assert len({r["server"] for r in reads}) == 4  # default, PASSIVE, ACTIVE, then retain: one more torch load
    assert not any(running(r["server"]) for r in reads)  # all ended with the probes


@pytest.mark.skipif(not __import__("tuner.knobs", fromlist=["glibc"]).glibc(), reason="glibc's malloc only")
def test_a_study_trains_every_trial_but_the_baseline_under_both_thresholds_where_retain_won(
        ray_session, tmp_path, capsys, monkeypatch, no_policy, space_search):
    for key in SPEED_ENV:
        monkeypatch.delenv(key, raising=False)
    env_probes_always(monkeypatch)
    ceilings_on_a_ticking_clock(monkeypatch, "tuner.train.probe")
    rates = {"default": 1000.0, "PASSIVE": 500.0, "ACTIVE": 1500.0, "retain": 1700.0}
    monkeypatch.setattr(_env_probe, "read_value", lambda knob, value, *a, **k: rates[value])
    code, _, err, _, reports = space_search.run(BOTH, "--study", "m", "--confirm", "0", "--parity-seconds", "0",
                                                name="both.yaml")
    assert code == 0, err
    assert "probing malloc (default, retain)" in err and "retain chosen" in err
    records = {r["trial"]: r for r in load_trials(reports / "m")}
    retain = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}
    assert not set(retain) & set(records[0]["environment"]["variables"])  # the baseline: the user's allocator
    assert records[1]["params"]["malloc"] == "retain"
    had = records[1]["environment"]["variables"]  # its process's own, from before its torch loaded
    assert had["OMP_WAIT_POLICY"] == "ACTIVE" and {k: had.get(k) for k in retain} == retain
    assert not set(retain) & set(os.environ)  # the driver's own environment: untouched


def _started(pid):
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat's 22nd field)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def reads_its_server_start(job):
    """Planted reading (pickled by value into the forked child): its server, when that server and this child
    started, and the knobs' variables; no policy or malloc setting beats the default."""
    keys = ("OMP_WAIT_POLICY", "MALLOC_MMAP_THRESHOLD_")
    env = {k: os.environ.get(k) for k in keys}
    with open(os.environ["TUNER_TEST_SEEN"], "a") as f:
        f.write(json.dumps({"server": os.getppid(), "server_at": _started(os.getppid()), "at": _started(os.getpid()),
                            "env": env}) + "\n")
    return {"compute": 1000.0}


def test_where_the_policy_keeps_default_mallocs_server_loaded_with_the_policys_before_the_first_reading(
        tmp_path, monkeypatch, no_policy):
    """The default study's usual case: the wait policy keeps default, so malloc's retain is read under the user's
    own policy, from a server that started with the policy's three, before the first timed reading (no torch load
    between the two probes); values within noise are read once each (5 readings in all, 4 torch loads)."""
    out, reads = probe_both_in_servers(tmp_path, monkeypatch, reads_its_server_start)
    assert out.loader_for(32) == {}  # nothing beat the user's own environment
    assert [(r["env"]["OMP_WAIT_POLICY"], bool(r["env"]["MALLOC_MMAP_THRESHOLD_"])) for r in reads] == [
        (None, False), ("PASSIVE", False), ("ACTIVE", False), (None, False), (None, True)]
    assert len({r["server"] for r in reads}) == 4 and reads[0]["server"] == reads[3]["server"]
    assert reads[4]["server_at"] <= reads[0]["at"]  # retain's server was loaded before the first reading
    assert not any(running(r["server"]) for r in reads)


def test_the_env_probes_time_counts_in_the_probe_phase_the_summary_shows(monkeypatch, no_policy):
    """The summary's time split reads probes.json's seconds as "probes": the env probes (18 s of a default study)
    were left out of it and read as "overhead" (issue 55 item 3)."""
    import time
    from types import SimpleNamespace

    import yaml

    from tuner.search._env_probe import probe_environment
    from tuner.space import parse_space
    from tuner.study import ProbeChoice, ProbePlan

    space = parse_space(yaml.safe_load(SPACE), source="env.yaml", name="env")
    reads = []

    def read_value(*a, **k):
        reads.append(a)
        time.sleep(0.05)
        return 1000.0
    monkeypatch.setattr(_env_probe, "read_value", read_value)
    plan = ProbePlan(knobs=["omp_wait_policy"], choices=[ProbeChoice(batch_size=32, compute_ceiling=900.0)],
                     seconds=5.0)
    out = probe_environment(plan, roomy(), space, {"cpus": 2, "gpus": 0, "device": "cpu"},
                            {}, SimpleNamespace(cpus_per_process=2), None, True, 0.75)
    assert reads and out.seconds >= 5.0 + 0.05 * len(reads)


def test_the_env_probes_read_the_baselines_batch_with_the_deadline_its_probes_fitted_there(monkeypatch, no_policy):
    """Where the probes at the baseline's batch read with a longer deadline (a cut reading read again with one
    fitted to its step), the environment probes read there with it: its step needs it in their processes too."""
    from types import SimpleNamespace

    import yaml

    import tuner.knobs
    from tuner.search._env_probe import probe_environment
    from tuner.space import parse_space
    from tuner.study import ProbeChoice, ProbePlan

    monkeypatch.setattr(tuner.knobs, "glibc", lambda: True)
    space = parse_space(yaml.safe_load(BOTH), source="env.yaml", name="env")
    deadlines = []

    def read_value(knob, value, cfg, seconds, cache, threads, servers=None, under=None):
        deadlines.append(seconds)
        return 1000.0
    monkeypatch.setattr(_env_probe, "read_value", read_value)
    plan = ProbePlan(knobs=["omp_wait_policy", "malloc"],
                     choices=[ProbeChoice(batch_size=32, compute_ceiling=900.0, reading_seconds=1.8)])
    probe_environment(plan, roomy(), space, {"cpus": 2, "gpus": 0, "device": "cpu"}, {},
                      SimpleNamespace(cpus_per_process=2), Said(), True, 0.75)
    assert deadlines and set(deadlines) == {1.8}


def _probe_sized(monkeypatch, study):
    """The wait policy and malloc probed for `study` (roomy's fields), their readings planted: what was read and
    what was said."""
    import yaml

    import tuner.knobs
    from tuner.search._env_probe import probe_environment
    from tuner.space import parse_space
    from tuner.study import ProbeChoice, ProbePlan

    monkeypatch.setattr(tuner.knobs, "glibc", lambda: True)
    space = parse_space(yaml.safe_load(BOTH), source="env.yaml", name="env")
    reads = []
    monkeypatch.setattr(_env_probe, "read_value", lambda knob, value, *a, **k: reads.append(value) or 1000.0)
    plan = ProbePlan(knobs=["omp_wait_policy", "malloc"], choices=[ProbeChoice(batch_size=32, compute_ceiling=900.0)])
    said = Said()
    out = probe_environment(plan, study, space, {"cpus": 2, "gpus": 0, "device": "cpu"}, {},
                            __import__("types").SimpleNamespace(cpus_per_process=2), said, True, 0.75)
    return out, reads, said.lines


def test_a_study_too_short_to_pay_for_the_env_probes_leaves_the_users_environment_and_says_so(monkeypatch,
                                                                                              no_policy):
    """A docs page's small search (3 trials of 4 s) spent 30-40 s reading five fresh processes: more than its
    training. Now no process starts, the knobs stay as the user has them (not searched either), and one line gives
    both figures; the probe record and the export keep why."""
    out, reads, lines = _probe_sized(monkeypatch, roomy(trials=3, seconds=4.0))
    assert reads == []
    assert out.loader_for(32) == {} and set(out.knobs) == {"omp_wait_policy", "malloc"}
    said = [line for line in lines if "not probed, a quick study" in line]
    assert len(said) == 1 and "omp_wait_policy, malloc" in said[0]
    assert "about 18 s" in said[0] and "the study's 12 s of training" in said[0]
    assert [p.why.startswith("not read: a quick study") for p in out.environments] == [True, True]


def test_the_default_studys_size_still_probes_the_environment(monkeypatch, no_policy):
    """12 trials of 15 s (the default study): a 45 s share against about 18 s for one reading of each value."""
    out, reads, lines = _probe_sized(monkeypatch, roomy(trials=12, seconds=15.0))
    assert reads[:5] == ["default", "PASSIVE", "ACTIVE", "default", "retain"]
    assert not any("quick study" in line for line in lines)


def test_six_trials_of_15_s_pay_for_the_env_probes_as_they_took(monkeypatch, no_policy):
    """The servers start together, once, and a reading at a 1.5 s deadline took 2.3-2.7 s: five readings took
    about 18 s. Counting a server's start per reading put them at 32 s, and 6 trials of 15 s (a 22.5 s share, the
    env-policy benchmark's study) read none."""
    out, reads, lines = _probe_sized(monkeypatch, roomy(trials=6, seconds=15.0))
    assert reads[:5] == ["default", "PASSIVE", "ACTIVE", "default", "retain"]
    assert not any("quick study" in line for line in lines)
    out, reads, lines = _probe_sized(monkeypatch, roomy(trials=3, seconds=15.0))  # an 11 s share: too short
    assert reads == [] and any("about 18 s" in line for line in lines)


def test_a_quick_study_keeps_the_users_environment_where_the_baselines_batch_gave_no_reading(monkeypatch,
                                                                                            no_policy):
    """A new user's 3 trials of 4 s beside a busy loop: the baseline's batch gave no reading, and the knobs went to
    the trials to search, so a study too short to read them still ran its trials under other wait policies. The
    quick-study rule now comes first: nothing is read or searched, and the study says so."""
    from types import SimpleNamespace

    import yaml

    import tuner.knobs
    from tuner.search._env_probe import probe_environment
    from tuner.space import parse_space
    from tuner.study import ProbeChoice, ProbePlan

    monkeypatch.setattr(tuner.knobs, "glibc", lambda: True)
    space = parse_space(yaml.safe_load(BOTH), source="env.yaml", name="env")
    reads = []
    monkeypatch.setattr(_env_probe, "read_value", lambda knob, value, *a, **k: reads.append(value) or 1000.0)
    plan = ProbePlan(knobs=["omp_wait_policy", "malloc"], choices=[ProbeChoice(batch_size=32, compute_ceiling=None)])
    said = Said()
    out = probe_environment(plan, roomy(trials=3, seconds=4.0), space, {"cpus": 2, "gpus": 0, "device": "cpu"}, {},
                            SimpleNamespace(cpus_per_process=2), said, True, 0.75)
    assert reads == [] and out.unread == []
    assert set(out.knobs) == {"omp_wait_policy", "malloc"} and out.loader_for(32) == {}
    assert [p.why.startswith("not read: a quick study") for p in out.environments] == [True, True]
    assert sum("not probed, a quick study" in line for line in said.lines) == 1


def test_a_samples_budget_counts_at_the_preflights_pace_and_the_allowance_caps_the_training(monkeypatch,
                                                                                            no_policy):
    """A samples budget's training is its samples at the pre-flight's step; --study-seconds bounds the study's."""
    from tuner.config import Budget
    from tuner.study import Preflight

    study = roomy(trials=12)
    study.budget = Budget(samples=50_000)
    study.preflight = Preflight(step_seconds=0.02, step_samples=64)  # about 15.6 s a trial: 188 s in all
    assert _probe_sized(monkeypatch, study)[1]
    study.options.study_seconds = 60.0  # a 15 s share
    assert _probe_sized(monkeypatch, study)[1] == []
