"""Start storage node processes on loopback (tests, the demo, benchmarks)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dfs_cer.errors import StorageError


def _ready_port(path: Path) -> int:
    """The port a node wrote to its ready file (nodes write it atomically; older ones may not)."""
    for _ in range(100):
        try:
            return int(json.loads(path.read_text())["port"])
        except (ValueError, KeyError):
            time.sleep(0.02)
    raise StorageError(f"storage node ready file {path} is unreadable")


def node_command(
    data: str,
    port: int,
    token_file: Path,
    ready_file: Path,
    memory_budget: str | None = None,
    metrics: bool = False,
) -> list[str]:
    """The command line of one storage node process over ``data``."""
    cmd = [
        sys.executable,
        "-P",  # the installed storage node, not a storage_node directory in the cwd
        "-m",
        "storage_node.server",
        "--data",
        data,
        "--port",
        str(port),
        "--token-file",
        str(token_file),
        "--ready-file",
        str(ready_file),
    ]
    if memory_budget:
        cmd += ["--memory-budget", memory_budget]
    if metrics:
        cmd += ["--metrics-port", "0"]
    return cmd


class LocalCluster:
    """``n`` storage node processes, one per ``node-XX`` shard directory under ``shards``."""

    def __init__(
        self,
        data_dirs: list[str],
        *,
        env: dict[str, str] | None = None,
        memory_budget: str | None = None,
        tls: tuple[str, str] | None = None,
        netns: list[str] | None = None,
        hosts: list[str] | None = None,
        metrics: bool = False,
    ) -> None:
        """``netns``/``hosts``: run node i inside network namespace ``netns[i]`` listening on
        ``hosts[i]`` (``bench/net.sh up`` creates them); default: loopback."""
        if (netns is None) != (hosts is None) or (
            netns is not None
            and hosts is not None
            and not len(netns) == len(hosts) >= len(data_dirs)
        ):
            raise StorageError(
                f"give one network namespace and host per node: {len(data_dirs)} nodes, "
                f"netns={netns}, hosts={hosts} (run bench/net.sh up --nodes {len(data_dirs)})"
            )
        self.netns, self.hosts = netns, hosts
        self.data_dirs = data_dirs
        self.env = {**os.environ, **(env or {})}
        self.memory_budget = memory_budget
        self.tls = tls
        self.tmp = tempfile.TemporaryDirectory(prefix="dfs-cer-sn-")
        self.token = secrets.token_hex(16)
        self.token_file = Path(self.tmp.name) / "token"
        self.token_file.write_text(self.token)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[object] = []
        self.endpoints: list[str] = []
        #: with ``metrics``: each node's Prometheus endpoint (http://127.0.0.1:PORT/metrics)
        self.metrics = metrics
        self.metrics_urls: list[str] = []

    def _spawn(self, i: int, port: int = 0) -> Path:
        data = self.data_dirs[i]
        ready_file = Path(self.tmp.name) / f"ready-{i}.json"
        ready_file.unlink(missing_ok=True)
        cmd = node_command(
            data, port, self.token_file, ready_file, self.memory_budget, self.metrics
        )
        if self.netns and self.hosts:
            cmd = ["ip", "netns", "exec", self.netns[i], *cmd, "--host", self.hosts[i]]
        if self.tls:
            cmd += ["--tls-cert", self.tls[0], "--tls-key", self.tls[1]]
        log = open(Path(self.tmp.name) / f"node-{i}.log", "ab")  # noqa: SIM115 - lives with the process
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        if i < len(self.procs):
            self.logs[i].close()  # type: ignore[attr-defined]
            self.procs[i], self.logs[i] = proc, log
        else:
            self.procs.append(proc)
            self.logs.append(log)
        return ready_file

    def _wait_ready(self, i: int, path: Path, deadline: float, timeout: float) -> int:
        while not path.exists():
            status = self.procs[i].poll()
            if status is not None:
                self.stop()
                text = (Path(self.tmp.name) / f"node-{i}.log").read_text(errors="replace")
                self.tmp.cleanup()
                raise StorageError(
                    f"storage node {i} exited at start-up (exit status {status}): "
                    f"{text.strip().splitlines()[-1:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                self.tmp.cleanup()
                raise StorageError(f"storage node {i} did not start within {timeout:.0f} s")
            time.sleep(0.05)
        return _ready_port(path)

    def start(self, timeout: float = 300.0) -> LocalCluster:
        """Start every node; ``timeout`` covers their start-up (with storage.preload, loading and
        indexing their rows: about a minute per 20M rows on a slow machine)."""
        ready = [self._spawn(i) for i in range(len(self.data_dirs))]
        deadline = time.monotonic() + timeout
        for i, path in enumerate(ready):
            port = self._wait_ready(i, path, deadline, timeout)
            if self.metrics:
                metrics_port = json.loads(path.read_text())["metrics_port"]
                self.metrics_urls.append(f"http://127.0.0.1:{metrics_port}/metrics")
            scheme = "grpc+tls" if self.tls else "grpc+tcp"
            host = self.hosts[i] if self.hosts else "127.0.0.1"
            self.endpoints.append(f"{scheme}://{host}:{port}")
        return self

    # fault injection (tests, bench/chaos.py): node i killed, paused, resumed or restarted
    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` (no goodbye: its queries' state is lost with it)."""
        self.procs[i].kill()
        self.procs[i].wait()

    def pause(self, i: int) -> None:
        """SIGSTOP node ``i``: connections stay open and nothing answers (a hung node). Returns once
        every thread of the process is stopped (signal delivery is asynchronous: on a busy VM a
        request sent right after the kill could still be served)."""
        pid = self.procs[i].pid
        os.kill(pid, signal.SIGSTOP)
        give_up = time.monotonic() + 5.0
        while time.monotonic() < give_up:
            try:
                states = [
                    Path(t, "stat").read_text().rsplit(")", 1)[1].split()[0]
                    for t in Path(f"/proc/{pid}/task").iterdir()
                ]
            except OSError:  # a thread ended while we looked, or no /proc: look again
                states = []
            if states and all(st in ("T", "t") for st in states):
                return
            time.sleep(0.001)

    def resume(self, i: int) -> None:
        os.kill(self.procs[i].pid, signal.SIGCONT)

    def restart(self, i: int, timeout: float = 300.0) -> None:
        """Kill node ``i`` (if it runs) and start it again on the same port (state lost)."""
        if self.procs[i].poll() is None:
            self.resume(i)
            self.kill(i)
        port = int(self.endpoints[i].rsplit(":", 1)[1])
        path = self._spawn(i, port)
        self._wait_ready(i, path, time.monotonic() + timeout, timeout)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(OSError):
                    os.kill(p.pid, signal.SIGCONT)  # a paused node must see the SIGTERM
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        for log in self.logs:
            log.close()  # type: ignore[attr-defined]
        self.logs = []

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.tmp.cleanup()
