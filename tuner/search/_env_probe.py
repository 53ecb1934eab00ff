"""The knobs applied through the environment (tuner.knobs.env_knobs: the OpenMP wait policy, glibc's malloc
thresholds), probed in processes started under each value.

libgomp reads OMP_WAIT_POLICY once, when torch loads (glibc's malloc its MALLOC_*_THRESHOLD_ at its first call), so
a value cannot be tried in a process that loaded torch under another: each value is read in a process of its own
forked from a server started under that value (tuner.search._fresh.Servers: one torch load per value, however often
the value is read; a fresh interpreter per reading cost 25 s before the default study's first trial, lab notes'
twenty-third session; the servers start together, those the later probes' values need where the first keeps default
among them, and are all ready before the first timed reading), one at a time, at one config (the baseline's batch
with the speed knobs the other probes chose there), with one trial's threads. Values are read in rounds,
interleaved: every value once (default first); a value other than `default` (the user's environment, nothing set)
that beats default's reading by more than SPEED_GAIN is read again, then default (the reverse order), and kept only
where it beats default's reading of the same round by more than SPEED_GAIN in both rounds, as the other speed knobs
are kept (tuner.search._speed_probe). So one low reading of default (a moment's load) cannot decide: the
twenty-ninth session's probe chose ACTIVE on one reading each, default 1324 against ACTIVE 1808 samples/s, and three
interleaved rounds of full runs then read the two equal. Where no value beats default's first reading, a second
round could not change the choice, and none is read: the usual case costs one reading per value (before, every value
within 10% of the best was read twice, whatever it found). The knobs are probed one after another, each under what
the ones before it chose (the malloc probe's processes run under the wait policy chosen first), so the pick's
environment is the one read. A knob whose variables do nothing here (malloc without glibc, tuner.knobs.env_acts) is
not probed: said, and left as the user has it.

Why measure rather than preset: on a quiet 2-core CPU a passive policy made the default study's trials 1.4-1.7x
slower than libgomp's default; beside other work a spinning one collapsed 5-44x. Neither is right everywhere, and
the user's machine, with what else runs on it, is the one that decides (issue 58).
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from tuner.knobs import KNOBS
from tuner.search._allowance import trial_training_s
from tuner.space import Space
from tuner.study import EnvProbe, ProbePlan

if TYPE_CHECKING:
    from tuner.search._fresh import Servers
    from tuner.search._options import SearchPlan
    from tuner.search._resources import Resources

SPEED_GAIN = 0.05  # as tuner.search._speed_probe: a value is kept only where it beats default's reading by 5%,
# in each of two rounds
CHILD_TIMEOUT_S = 180.0  # one reading's process: the workload's set-up, a warm-up and one reading (plus twice its
# deadline, which a slow step's fitted reading makes long: tuner.search._probe.longest_reading)
READ_SECONDS = 1.5  # at least: a new process reads its one value cold, where the study's probes read theirs warm
# A study whose training is short cannot pay for the env probes: where one reading of each value (its deadline plus
# READ_EXTRA_S for its fork, set-up and warm-up) and the fork servers' start (SERVER_START_S, once: they start
# together; 4.8 s on 2 cores, lab notes' thirty-fifth session) cost more than ENV_SHARE of the study's training
# (trials x one trial's training), no env knob is probed and the user's environment is kept. The docs pages' small
# fitted searches each spent 30-40 s in these probes; the default study (12 trials of 15 s: a 45 s share against
# about 18 s of readings) and the env-policy benchmark's 6 trials (a 22.5 s share) still probe. A reading took
# 2.3-2.7 s at a 1.5 s deadline (sixty-seventh session): counting a server's start per reading, as before, put
# five readings at 32 s where they took about 18 s.
ENV_SHARE = 0.25
SERVER_START_S = 5.0
READ_EXTRA_S = 1.0


def user_set(knob: str, environ: Any = None) -> str | None:
    """The value the user set for one of the knob's variables (or a variable that decides the same, the knob's
    `env_too`): then it is theirs, kept and not probed."""
    environ = os.environ if environ is None else environ
    for key in (*KNOBS[knob].env, *KNOBS[knob].env_too):
        if key in environ and _decides(knob, key, environ[key]):
            return f"{key}={environ[key]}"
    return None


def _decides(knob: str, key: str, value: str) -> bool:
    """Whether `key=value` decides the knob: GLIBC_TUNABLES only where it tunes malloc, LD_PRELOAD only where it
    preloads an allocator (a preloaded profiler leaves glibc's malloc deciding)."""
    if knob == "malloc" and key == "GLIBC_TUNABLES":
        return "glibc.malloc." in value
    if knob == "malloc" and key == "LD_PRELOAD":
        return any(lib in value for lib in ("jemalloc", "tcmalloc", "mimalloc"))
    return True


def read_value(knob: str, value: str, cfg_json: str, seconds: float, cache_dir: str, threads: int | None,
               servers: "Servers | None" = None, under: dict[str, str] | None = None) -> float | None:
    """The compute ceiling (samples/s) of `cfg_json` in a process of its own whose environment sets the knob's
    variable to `value` (`default`: as this process's environment has it), forked from `servers`' server for that
    environment (a fresh interpreter where the host does not fork; None: a server for this reading alone). Its
    output is dropped. None where the child failed. `under`: the variables the knobs probed before it chose."""
    from tuner.search._fresh import Servers, run_job

    env = _env(knob, value, under)
    job = {"config": cfg_json, "seconds": max(seconds, READ_SECONDS), "cache_dir": cache_dir, "threads": threads}
    timeout = CHILD_TIMEOUT_S + 2 * job["seconds"]
    own = servers is None
    servers = Servers() if servers is None else servers
    try:
        code, payload = run_job(read_here, (job,), env, servers=servers, quiet=True, timeout=timeout)
    finally:
        if own:
            servers.close()
    found = (payload or {}).get("compute") if code == 0 else None
    return float(found) if found else None


def probe_env(knob: str, values: list[str], batch_size: int, cfg_json: str, seconds: float, cache_dir: str,
              threads: int | None, reader: Any = None, under: dict[str, str] | None = None,
              shared: "Servers | None" = None, also: list[dict[str, str | None] | None] | None = None) -> EnvProbe:
    """Read each value (default first), a second round of what beat default and of default, and choose (see the
    module's rule): each value once where nothing beat default's first reading. `reader` reads one value (tests plant
    one: a real reading needs a process per value and seconds each); read_value's are forked from one server per
    value, ended when the probe is (`shared`: servers the caller keeps and ends, among them those of the probes
    before this one: a value whose environment one of them has is forked from it, not from a new torch load).
    `under`: the variables the env knobs probed before this one chose, which every value's processes run under.
    `also`: environments whose servers start with this probe's (into `shared`), for the probes after it."""
    t0 = time.perf_counter()
    values = ["default", *(v for v in values if v != "default")]
    probe = EnvProbe(knob=knob, batch_size=batch_size, readings={v: [] for v in values})
    servers = _servers([*(_env(knob, v, under) for v in values), *(also or [])], shared)

    def read(value: str) -> None:
        args = (knob, value, cfg_json, seconds, cache_dir, threads)
        probe.readings[value].append(reader(*args) if reader else read_value(*args, servers, under))

    try:
        for value in values:  # the first round: every value once
            read(value)
        ahead = _ahead(probe, 0)
        if ahead:  # the second: what beat default, then default, in reverse order
            for value in [*reversed(ahead), "default"]:
                read(value)
    finally:
        if shared is None:
            servers.close()
    choose(probe)
    probe.seconds = round(time.perf_counter() - t0, 2)
    return probe


def _env(knob: str, value: str, under: dict[str, str] | None) -> dict[str, str | None] | None:
    """The environment-knob variables a reading of `value` runs under: what the knobs before it chose, and what
    `value` sets (None: the user's environment, as at `default` with nothing chosen before)."""
    env = {**(under or {}), **KNOBS[knob].env_sets(value)}
    return env or None


def _servers(envs: list[dict[str, str | None] | None], shared: "Servers | None" = None) -> "Servers":
    """The probe's fork servers, one per value, all started with its first reading (tuner.search._fresh.Servers):
    their imports overlap, and all are ready before the first timed run, so none imports beside one. With `shared`,
    its servers: one already started under a value's environment is that value's."""
    from tuner.search._fresh import Servers

    class Planned(Servers):
        def get(self, env: dict[str, str | None] | None = None, quiet: bool = False) -> Any:
            if envs:
                planned = envs[:]
                envs.clear()
                self.start(planned, quiet=quiet)
            return super().get(env, quiet=quiet)

    planned = Planned()
    if shared is not None:
        planned.by_env = shared.by_env  # one set of servers: what starts here, the caller ends
    return planned


def _ahead(probe: EnvProbe, rnd: int) -> list[str]:
    """The values other than default whose reading of round `rnd` (0: the first) beats default's of that round by
    more than SPEED_GAIN, in the order read."""
    base = _reading(probe, "default", rnd)
    return [v for v in probe.readings if v != "default" and base
            and (_reading(probe, v, rnd) or 0.0) > (1 + SPEED_GAIN) * base]


def _reading(probe: EnvProbe, value: str, rnd: int) -> float | None:
    read = probe.readings.get(value, [])
    return read[rnd] if rnd < len(read) else None


def choose(probe: EnvProbe) -> None:
    """Set `chosen` and `why`: of the values that beat default's reading by more than SPEED_GAIN in every round
    default was read in, the one whose lowest gain over default is the highest; else none (the user's environment
    stays as it is)."""
    if _reading(probe, "default", 0) is None:
        probe.chosen, probe.why = {}, "default not read: the environment left as it is"
        return
    rounds = len(probe.readings["default"])
    gains = {}
    for value in probe.readings:
        if value != "default" and all(value in _ahead(probe, r) for r in range(rounds)):
            gains[value] = min(_reading(probe, value, r) / _reading(probe, "default", r) for r in range(rounds))
    shown = "; ".join(f"{v} {'/'.join(f'{r:.0f}' if r else '-' for r in read)}" for v, read in probe.readings.items()
                      if any(read)) + " samples/s"
    again = " in both rounds" if rounds > 1 else ""
    if not gains:
        probe.chosen = {}
        probe.why = f"default (yours) kept: {shown}, none more than {SPEED_GAIN:.0%} faster than default{again}"
        return
    value = max(gains, key=lambda v: gains[v])
    probe.chosen = {probe.knob: value}
    probe.why = f"{value} chosen: {shown} (x{gains[value]:.2f} over default{again}, batch {probe.batch_size})"


def probe_environment(loaders: ProbePlan, plan: "SearchPlan", space: Space, context: dict[str, Any],
                       base: dict[str, Any], resources: "Resources", console: Any, here: bool,
                       seconds: float) -> ProbePlan:
    """The knobs set through the environment (the OpenMP wait policy, glibc's malloc), one after another, each read
    in processes started under each value (and what the ones before it chose) at the baseline's batch with the
    speed knobs chosen there (tuner.search._env_probe). A value the user set is theirs: kept, not probed; so is a
    knob whose variables do nothing here (malloc without glibc). Where the probes run elsewhere (a cluster's
    nodes), the trials search it, each in the environment it draws (tuner.search._fresh.wanted_env)."""
    from tuner.search._fresh import Servers

    t0 = time.perf_counter()
    shared = Servers()  # a server under an environment a probe before read serves the next probe's reading there
    try:
        probed = _probe_each(loaders, plan, space, context, base, resources, console, here, seconds, shared)
    finally:
        shared.close()
    # part of the probe phase's wall time (probes.json's seconds), which the summary's time split shows as probes:
    # the env probes' 18 s read as "overhead" there
    return probed.model_copy(update={"seconds": round(probed.seconds + time.perf_counter() - t0, 2)})


def _probe_each(loaders: ProbePlan, plan: "SearchPlan", space: Space, context: dict[str, Any], base: dict[str, Any],
                resources: "Resources", console: Any, here: bool, seconds: float, shared: "Servers") -> ProbePlan:
    from tuner.config import dump_config
    from tuner.knobs import env_acts, env_knobs, knob_env

    # the knobs to probe: their values, the batch they are read at and its deadline (longer where the probes there
    # fitted one to a step their own cut: tuner.train.probe_ceilings); `there` None where that batch gave no reading
    todo: list[tuple[str, list[str], int, float]] = []
    wanted: list[tuple[str, list[str], int, float, Any]] = []
    for name in [k for k in loaders.knobs if k in env_knobs()]:
        if not here:
            loaders.knobs.remove(name)
            continue
        mine = user_set(name)
        if mine is not None:
            if console is not None:
                console.print(f"  {name}: yours ({mine}) kept, not probed", soft_wrap=True)
            continue
        idle = env_acts(name)
        if idle is not None:
            if console is not None:
                console.print(f"  {name}: not probed, {idle}: left as yours", soft_wrap=True)
            continue
        values = [str(v) for v in (space.params[name].choices or [])]
        baseline = space.baseline_point(context)
        batch = loaders.split["batch_size"] if loaders.split else baseline.get("batch_size")
        there = next((c for c in loaders.choices if c.batch_size == batch), None) if batch is not None else \
            (loaders.choices[0] if len(loaders.choices) == 1 else None)  # a fixed batch: the one probed
        read_at = there.batch_size if there is not None else int(batch or 0)
        wanted.append((name, values, read_at, max(seconds, (there.reading_seconds if there else None) or 0.0), there))
    # A quick study keeps the user's environment whether or not the baseline's batch could be read: asked first, so
    # an unread knob is not handed to so short a study's trials to search either.
    why = too_short([w[:4] for w in wanted], plan)
    if why is not None:
        for name, _, batch, _, _ in wanted:  # kept in the probes' knobs: the trials run in the user's environment
            loaders.environments.append(EnvProbe(knob=name, batch_size=batch, why=f"not read: {why}"))
        if console is not None and wanted:
            console.print(f"  {', '.join(n for n, *_ in wanted)}: not probed, {why}: left as yours", soft_wrap=True)
        return loaders
    for name, values, batch, deadline, there in wanted:
        if there is None or there.compute_ceiling is None:  # a step too slow for a reading: the processes
            loaders.knobs.remove(name)  # would each pay their start for nothing; the trials search it instead
            loaders.unread.append(name)  # said with the others the probes could not read
            continue
        todo.append((name, values, batch, deadline))
    for i, (name, values, batch, deadline) in enumerate(todo):
        baseline = space.baseline_point(context)
        chosen = loaders.loader_for(batch)  # the env knobs probed before this one included: it is read under them
        point = {k: v for k, v in baseline.items() if k not in loaders.knobs} | chosen
        cfg = space.trial_config(point, base, source="probe")
        under = knob_env(cfg.params)
        # The first probe's servers start with those the later probes' values need where it keeps default (the
        # usual case): their torch loads overlap, all before the first timed reading, rather than one more load
        # alone between two probes. Where it chooses another value, those wait unused and end with the probes.
        also = [_env(n, v, under) for n, vs, _, _ in todo[i + 1:] for v in vs] if i == 0 else []
        if console is not None:
            console.print(f"probing {name} ({', '.join(['default', *(v for v in values if v != 'default')])}) at "
                          f"batch {cfg.params.batch_size}, each in processes started under it (read once, "
                          f"{KNOBS[name].env_read})"
                          + (f", under {' '.join(f'{k}={v}' for k, v in under.items())}" if under else "")
                          + f": one reading each; default and any value more than {SPEED_GAIN:.0%} faster read again, "
                          f"in reverse order ...", soft_wrap=True)
        probe = probe_env(name, values, cfg.params.batch_size, json.dumps(dump_config(cfg)), deadline,
                          str(plan.cache_dir), resources.cpus_per_process, under=under, shared=shared, also=also)
        loaders.environments.append(probe)
        if console is not None:
            console.print(f"  {probe.why} ({probe.seconds:.0f} s)", soft_wrap=True)
    return loaders


def too_short(todo: list[tuple[str, list[str], int, float]], plan: "SearchPlan") -> str | None:
    """Why the env probes would cost more than ENV_SHARE of the study's training (None: they fit): the servers'
    start (once) and one reading of each value to probe (its deadline, READ_SECONDS at least, plus READ_EXTRA_S)
    against trials x one trial's training (tuner.search._allowance.trial_training_s; with --study-seconds, that
    allowance at most)."""
    if not todo:
        return None
    cost = SERVER_START_S + sum(max(deadline, READ_SECONDS) + READ_EXTRA_S for _, values, _, deadline in todo
                                for _ in ["default", *(v for v in values if v != "default")])
    training = plan.trials * trial_training_s(plan.budget, plan.preflight.step_seconds, plan.preflight.step_samples)
    if plan.options.study_seconds is not None:
        training = min(training, plan.options.study_seconds)
    if cost <= ENV_SHARE * training:
        return None
    return (f"a quick study: one reading of each value would take about {cost:.0f} s, more than {ENV_SHARE:.0%} of "
            f"the study's {training:.0f} s of training (a larger --trials or budget has them read)")


def read_here(job: dict[str, Any]) -> dict[str, Any]:
    """One reading, in the process forked for it: {"compute": samples/s} (None: no reading)."""
    from pathlib import Path

    import torch

    from tuner.config import parse_config
    from tuner.train import probe_ceilings

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    cfg = parse_config(json.loads(job["config"]), "probe")
    found = probe_ceilings(cfg, [], float(job["seconds"]), None, Path(job["cache_dir"]), speeds=[{}])
    return {"compute": found.get("compute")}
