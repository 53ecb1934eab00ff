"""Do re-runs forked from an import-only server spread like fresh processes? (issue 20 item 6; issue 18's promise)

`python benchmarks/forked_reruns.py EXPORT.yaml N OUT.json` trains the export with `tuner train` N times as a child
forked from a server that imported what tuner.search._fresh's server imports, and N times as a fresh interpreter,
interleaved, and writes both throughput lists and the load. Run it on a quiet machine; results in
benchmarks/results/retrain.{json,md}.
"""
import json
import os
import subprocess
import sys
CFG = sys.argv[1]; N = int(sys.argv[2]); OUT = sys.argv[3]
def fresh():
    p = subprocess.run([sys.executable, "-m", "tuner", "train", "--config", CFG, "--format", "json", "--reports-dir", "/tmp/forkvs-r"], capture_output=True, text=True)
    return json.loads(p.stdout)["throughput"] if p.returncode == 0 else None
# server: imports as _fresh's does, then forks a child per request that runs the tuner CLI in-process
SERVER = r'''
import os, sys, json, importlib
import torch
from tuner.search._fresh import _PRELOAD
for n in _PRELOAD: importlib.import_module(n)
for line in sys.stdin:
    out = line.strip()
    pid = os.fork()
    if pid == 0:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC); os.dup2(fd, 1)
        from tuner.cli import main
        code = main(["train", "--config", sys.argv[1], "--format", "json", "--reports-dir", "/tmp/forkvs-r"])
        sys.stdout.flush(); os._exit(code or 0)
    os.waitpid(pid, 0); print("done", flush=True)
'''
srv = subprocess.Popen([sys.executable, "-c", SERVER, CFG], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
def forked(i):
    out = f"/tmp/forkvs-{i}.json"
    srv.stdin.write(out + "\n"); srv.stdin.flush(); srv.stdout.readline()
    try: return json.loads(open(out).read())["throughput"]
    except Exception as e: return None
res = {"fresh": [], "forked": [], "load": []}
for i in range(N):
    for kind in (("forked", "fresh") if i % 2 == 0 else ("fresh", "forked")):
        v = forked(i) if kind == "forked" else fresh()
        res[kind].append(v); res["load"].append(os.getloadavg()[0])
        print(kind, v, flush=True)
json.dump(res, open(OUT, "w"))
