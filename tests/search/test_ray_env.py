"""Starting and stopping the Ray a study starts on this machine (tuner.search._ray_env)."""

from __future__ import annotations

import json
import subprocess
import sys

STARTS_AND_STOPS = """
import json, os, sys
import ray
from tuner.search._ray_env import start_local_ray, stop_ray
from ray._private import worker
from ray._private.node import Node

verbose = sys.argv[1] == "verbose"
start_local_ray(1, 0, verbose=verbose)
pids = {kind: [i.process.pid for i in infos] for kind, infos in worker._global_node.all_processes.items()}
answer = ray.get(ray.remote(lambda: 41 + 1).remote())
restored = all(getattr(Node, name).__name__ == name for name in ("start_monitor", "start_api_server",
                                                                  "start_log_monitor"))
stop_ray(local=True)
alive = {kind: [p for p in ps if os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z"]
         for kind, ps in pids.items()}
print(json.dumps({"started": sorted(pids), "alive": {k: v for k, v in alive.items() if v}, "answer": answer,
                  "restored": restored}))
"""


def start_and_stop(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", STARTS_AND_STOPS, mode], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_local_ray_starts_without_the_head_processes_a_study_never_uses_and_stops_every_one_it_started():
    """No autoscaler monitor (a fixed local node), no API server (ray.init waited for it to register: 3.4-3.8 s
    against 1.5 s without), and no log monitor unless --verbose shows workers' output; tasks still run, Ray's own
    methods are back as they were, and every process Ray started ends with stop_ray."""
    quiet = start_and_stop("quiet")
    assert {"gcs_server", "raylet"} <= set(quiet["started"])
    assert not {"monitor", "dashboard", "log_monitor"} & set(quiet["started"])
    assert quiet["answer"] == 42 and quiet["restored"] and quiet["alive"] == {}
    verbose = start_and_stop("verbose")
    assert "log_monitor" in verbose["started"] and "monitor" not in verbose["started"]
    assert verbose["answer"] == 42 and verbose["alive"] == {}
