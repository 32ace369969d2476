"""Storage nodes in the background on this machine (``dfs-cer storage-node up`` / ``down``).

``up`` starts one detached node process per shard set (or per share of a table), writes a
random token (when there is none) and a nodes file naming the endpoints, the token file, the
processes and their logs; ``dfs-cer query`` reads that file when no ``--endpoints`` are given.
``down`` stops the processes the file names (only processes that are still storage nodes: a
recycled process id is left alone) and removes the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from dfs_cer.errors import ConfigError, StorageError
from dfs_cer.io.nodefile import DEFAULT_DIR, TOKEN_FILE, Nodes, nodes_path, read_nodes
from storage_node.launcher import node_command


def write_token(path: Path) -> bool:
    """A random 32-character token at ``path``, readable by its owner only, unless one is there
    (returns whether it wrote one)."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(16) + "\n")
    return True


def shard_sets(shards: str) -> list[str]:
    """The shard sets under ``shards`` (the ``node-XX`` directories ``dfs-cer shard`` writes, in
    order), or ``shards`` itself when it is one."""
    root = Path(shards)
    if not root.is_dir():
        raise ConfigError(
            f"--shards {shards} is not a directory: give the output directory of dfs-cer shard "
            "(its node-XX directories), or --table for a table served in place"
        )
    sets = sorted(str(p) for p in root.iterdir() if p.is_dir() and (p / "manifest.json").is_file())
    if sets:
        return sets
    if (root / "manifest.json").is_file():
        return [str(root)]
    raise ConfigError(
        f"--shards {shards} holds no shard set (no manifest.json in it or its directories): "
        "write one with dfs-cer shard --input LOG --nodes N --out DIR"
    )


def table_shares(table: str, nodes: int) -> list[str]:
    """One data reference per node for a table served in place: its share ``node=i/N``."""
    joiner = "&" if "?" in table else "?"
    return [f"{table}{joiner}node={i}/{nodes}" for i in range(nodes)]


def is_node(pid: int) -> bool:
    """Whether process ``pid`` runs and is a storage node (not a process that took its id)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc here: trust the id
    return b"storage_node.server" in cmdline


def up(
    data: list[str],
    state_dir: str = DEFAULT_DIR,
    *,
    memory_budget: str | None = None,
    host: str | None = None,
    timeout: float = 300.0,
    progress: Callable[[str], None] | None = None,
    metrics: bool = False,
) -> Nodes:
    """Start one node per entry of ``data`` in the background and write the nodes file."""
    root = Path(state_dir).resolve()
    current = read_nodes(state_dir)
    if current is not None and any(is_node(p) for p in current.pids):
        raise StorageError(
            f"storage nodes from {nodes_path(state_dir)} are running "
            f"({', '.join(current.endpoints)}): stop them with dfs-cer storage-node down first"
        )
    root.mkdir(parents=True, exist_ok=True)
    token_file = root / TOKEN_FILE
    write_token(token_file)
    procs: list[subprocess.Popen[bytes]] = []
    ready: list[Path] = []
    logs: list[str] = []
    for i, where in enumerate(data):
        ready_file = root / f"ready-{i}.json"
        ready_file.unlink(missing_ok=True)
        log_path = root / f"node-{i}.log"
        cmd = node_command(where, 0, token_file, ready_file, memory_budget, metrics)
        if host:
            cmd += ["--host", host]
        with open(log_path, "ab") as log:
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # lives on after this command, apart from its signals
                )
            )
        ready.append(ready_file)
        logs.append(str(log_path))
    endpoints: list[str] = []
    urls: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        for i, path in enumerate(ready):
            if progress:
                progress(f"starting storage node {i + 1} of {len(data)} ({data[i]})")
            endpoint, metrics_port = _wait(procs[i], path, Path(logs[i]), deadline, host, data[i])
            endpoints.append(endpoint)
            if metrics_port is not None:
                urls.append(f"http://127.0.0.1:{metrics_port}/metrics")
    except BaseException:
        for proc in procs:
            _stop(proc.pid)
        raise
    nodes = Nodes(endpoints, str(token_file), [p.pid for p in procs], data, logs, urls)
    tmp = nodes_path(state_dir).with_suffix(".tmp")
    tmp.write_text(nodes.to_json())
    os.replace(tmp, nodes_path(state_dir))
    for path in ready:
        path.unlink(missing_ok=True)
    return nodes


def _wait(
    proc: subprocess.Popen[bytes],
    ready: Path,
    log: Path,
    deadline: float,
    host: str | None,
    data: str,
) -> tuple[str, int | None]:
    """The node's endpoint and metrics port, once its ready file is written."""
    while not ready.exists():
        status = proc.poll()
        if status is not None:
            lines = log.read_text(errors="replace").strip().splitlines()
            raise StorageError(
                f"the storage node for {data} exited at start-up (exit status {status}): "
                f"{lines[-1] if lines else 'no output'} (its log: {log})"
            )
        if time.monotonic() > deadline:
            raise StorageError(
                f"the storage node for {data} did not start in time (its log: {log}); a large "
                "shard set preloads its rows first: give --timeout more seconds"
            )
        time.sleep(0.05)
    for _ in range(100):
        with contextlib.suppress(ValueError, KeyError):
            doc = json.loads(ready.read_text())
            metrics = doc.get("metrics_port")
            endpoint = f"{host or '127.0.0.1'}:{int(doc['port'])}"
            return endpoint, None if metrics is None else int(metrics)
        time.sleep(0.02)
    raise StorageError(f"the storage node for {data} wrote an unreadable ready file {ready}")


def _stop(pid: int, wait: float = 10.0) -> bool:
    """SIGTERM a storage node, SIGKILL it after ``wait`` seconds; whether it was running."""
    if not is_node(pid):
        return False
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    give_up = time.monotonic() + wait
    while time.monotonic() < give_up:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)  # reap it when this process started it
        if not is_node(pid) or _zombie(pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    return True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def down(state_dir: str = DEFAULT_DIR) -> tuple[Nodes | None, int]:
    """Stop the nodes the nodes file names and remove the file (the token stays for the next
    ``up``): the file's nodes (None when there was none) and how many were running."""
    nodes = read_nodes(state_dir)
    if nodes is None:
        return None, 0
    stopped = sum(_stop(pid) for pid in nodes.pids)
    nodes_path(state_dir).unlink(missing_ok=True)
    return nodes, stopped
