"""Starting and stopping the Ray a study starts on this machine (tuner.search._ray_env)."""

from __future__ import annotations

import json
import subprocess
import sys

STARTS_AND_STOPS = """
import json, os
from tuner.search._ray_env import start_local_ray, stop_ray
from ray._private import worker

start_local_ray(1, 0)
pids = {kind: [i.process.pid for i in infos] for kind, infos in worker._global_node.all_processes.items()}
stop_ray(local=True)
alive = {kind: [p for p in ps if os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z"]
         for kind, ps in pids.items()}
print(json.dumps({"started": sorted(pids), "alive": {k: v for k, v in alive.items() if v}}))
"""


def test_stopping_a_local_ray_ends_every_process_it_started_the_autoscalers_monitor_included():
    """The monitor is killed ahead of ray.shutdown (it never ends within the second Ray waits on SIGTERM): it
    must still end, and so must everything else Ray started."""
    out = subprocess.run([sys.executable, "-c", STARTS_AND_STOPS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert "monitor" in found["started"] and "raylet" in found["started"]
    assert found["alive"] == {}
