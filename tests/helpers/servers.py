"""Servers that tests start themselves, on the loopback interface only, and stop at the end.

- `PostgresServer`: a throwaway PostgreSQL cluster (`initdb` + `pg_ctl`) in a temp folder, listening on
  127.0.0.1 and a socket in that folder, trust authentication, one database. Run as the unprivileged `postgres`
  user when the tests run as root (initdb refuses root).
- `RayCluster`: a Ray head and a second node started with `ray start --block` on this machine, each with one CPU
  and a custom resource that names it, on 127.0.0.2 (a loopback address Ray does not rewrite to the host's
  network address, as it does 127.0.0.1). Every process is in a session of its own, so stopping kills exactly
  those sessions' processes (Ray's workers leave the process group but not the session).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
RAY_HOST = "127.0.0.2"


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def session_pids(sid: int) -> list[int]:
    """Every process whose session id is `sid` (the session a `start_new_session` child created)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
        if len(fields) > 3 and int(fields[3]) == sid:
            out.append(int(entry.name))
    return out


def kill_session(sid: int, timeout: float = 15.0) -> None:
    """SIGKILL every process of the session until none is left (zombies of a dead parent are the kernel's)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in session_pids(sid) if not _zombie(p)]
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.2)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].startswith("Z")


# --- PostgreSQL -----------------------------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    """The folder of initdb, pg_ctl and postgres: Debian's /usr/lib/postgresql/<version>/bin (newest first), or
    wherever PATH finds initdb."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version(p.parent.name),
                        reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).resolve().parent)
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _version(name: str) -> float:
    try:
        return float(name)
    except ValueError:
        return 0.0


@dataclass
class PostgresServer:
    bin: Path
    root: Path  # temp folder: data/, the socket, the log
    port: int
    run_as: str | None  # the user the server runs as (None: this one)
    user: str = "tuner"
    database: str = "tuner_test"
    started: bool = False

    @property
    def url(self) -> str:
        """What a user types: a plain postgresql:// URL (tuner picks the driver)."""
        return f"postgresql://{self.user}@{LOOPBACK}:{self.port}/{self.database}"

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if check and done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}\n{tail}")
        return done

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync",
                  "--no-instructions")
        options = (f"-c listen_addresses={LOOPBACK} -p {self.port} -k {self.root} -c fsync=off "
                   f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=40")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "-t",
                  "60", "start")
        self.started = True
        self._run("createdb", "-h", LOOPBACK, "-p", str(self.port), "-U", self.user, self.database)

    def stop(self) -> None:
        if self.started:
            self._run("pg_ctl", "-D", str(self.data), "stop", "-m", "immediate", "-w", "-t", "30", check=False)
            pid_file = self.data / "postmaster.pid"
            if pid_file.is_file():  # pg_ctl could not stop it: end the postmaster (its children follow)
                try:
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
                except (ValueError, ProcessLookupError, PermissionError):
                    pass
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """A running throwaway server (the caller stops it); RuntimeError when it would not start."""
    folder = postgres_bin()
    assert folder is not None, "postgres_bin() found no PostgreSQL binaries"
    run_as = "postgres" if os.geteuid() == 0 else None
    if run_as:
        try:
            pwd.getpwnam(run_as)
        except KeyError:
            raise RuntimeError("initdb refuses to run as root and there is no `postgres` user to run it as "
                               "(Debian's postgresql package creates it)") from None
    last: Exception | None = None
    for _ in range(3):  # a free port can be taken between the check and the bind: try another
        # Not under pytest's tmp_path: that is private to root, and the server runs as another user.
        root = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
        if run_as:
            entry = pwd.getpwnam(run_as)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        server = PostgresServer(bin=folder, root=root, port=free_port(), run_as=run_as)
        try:
            server.start()
            return server
        except BaseException as err:
            last = err
            server.stop()
            if not isinstance(err, RuntimeError):
                raise
    raise RuntimeError(f"PostgreSQL would not start: {last}")


# --- Ray ------------------------------------------------------------------------------------------------------


def ray_env() -> dict[str, str]:
    """What the Ray nodes run with: quiet, and no PYTHONPATH to this checkout, so that workers get tuner and the
    user's module only through what the driver ships."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    return env


@dataclass
class RayCluster:
    root: Path  # Ray's temp dir (sessions, logs) and the nodes' output
    port: int = 0
    procs: list[subprocess.Popen] = field(default_factory=list)
    nodes: dict[str, str] = field(default_factory=dict)  # Ray node id -> the custom resource naming it

    @property
    def address(self) -> str:
        return f"{RAY_HOST}:{self.port}"

    def _start_node(self, name: str, *args: str) -> None:
        ports = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
                 "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port"]
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", *args,
               "--node-ip-address", RAY_HOST, "--num-cpus", "1", "--num-gpus", "0",
               "--resources", json.dumps({name: 1}), "--temp-dir", str(self.root), "--disable-usage-stats",
               "--object-store-memory", str(100 * 2**20)]
        for option in ports:
            cmd += [option, str(free_port(RAY_HOST))]
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 - closed when the process ends
        self.procs.append(subprocess.Popen(cmd, cwd=self.root, env=ray_env(), stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text()[-3000:] if path.is_file() else ""

    def start(self, timeout: float = 120) -> None:
        self.port = free_port(RAY_HOST)
        self._start_node("node_head", "--head", "--port", str(self.port), "--include-dashboard=false")
        self._wait_for("node_head", timeout)
        self._start_node("node_b", "--address", self.address)
        self.nodes = self._alive_nodes(2, timeout)

    def _wait_for(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while "Ray runtime started" not in self.log(name):
            if any(p.poll() is not None for p in self.procs) or time.monotonic() > deadline:
                raise RuntimeError(f"ray start ({name}) did not start:\n{self.log(name)}")
            time.sleep(0.3)

    def _alive_nodes(self, count: int, timeout: float) -> dict[str, str]:
        """Ray node id -> name, once `count` nodes are alive (asked in a separate driver process)."""
        script = (
            "import json, sys, time, ray\n"
            f"ray.init(address={self.address!r}, log_to_driver=False)\n"
            f"deadline = time.monotonic() + {timeout}\n"
            "while True:\n"
            "    alive = [n for n in ray.nodes() if n['Alive']]\n"
            f"    if len(alive) >= {count} or time.monotonic() > deadline: break\n"
            "    time.sleep(0.5)\n"
            "print(json.dumps({n['NodeID']: [k for k in n['Resources'] if k.startswith('node_')] for n in alive}))\n"
        )
        done = subprocess.run([sys.executable, "-c", script], env=ray_env(), cwd=self.root, capture_output=True,
                              text=True, timeout=timeout + 60)
        if done.returncode != 0:
            raise RuntimeError(f"cannot list the cluster's nodes: {done.stderr[-2000:]}")
        nodes = {node: names[0] for node, names in json.loads(done.stdout.strip().splitlines()[-1]).items() if names}
        if len(nodes) < count:
            raise RuntimeError(f"{len(nodes)} of {count} Ray nodes came up:\n{self.log('node_b')}")
        return nodes

    def stop(self) -> None:
        for proc in reversed(self.procs):
            kill_session(proc.pid)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def start_ray_cluster() -> RayCluster:
    """A running two-node cluster (the caller stops it); RuntimeError when it would not start."""
    # A short path: Ray's socket paths under it must stay below the 107-character limit of a Unix socket name.
    cluster = RayCluster(root=Path(tempfile.mkdtemp(prefix="tr-", dir="/tmp")))
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
