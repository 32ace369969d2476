"""Storage nodes in the background on this machine (``dfs-cer storage-node up`` / ``down``).

``up`` starts one detached node process per shard set (or per share of a table), writes a
random token (when there is none) and a nodes file naming the endpoints, the token file, the
processes and their logs; ``dfs-cer query`` reads that file when no ``--endpoints`` are given.
``down`` stops the processes the file names (only processes that are still storage nodes: a
recycled process id is left alone) and removes the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dfs_cer.errors import ConfigError, StorageError
from dfs_cer.io.nodefile import DEFAULT_DIR, TOKEN_FILE, Nodes, nodes_path, read_nodes
from storage_node.launcher import node_command


def write_token(path: Path) -> str:
    """A random 32-character token at ``path``, readable by its owner only, unless one is there:
    ``"wrote"``, ``"kept"``, or ``"tightened"`` (the file there was open to its group or others:
    made 0600). A token file of another user's open to others is refused (StorageError naming
    its mode and the fix); so is a kept token too short for a node to start with (ConfigError)."""
    if path.exists():
        done = "tightened" if tighten_token(path) else "kept"
        try:
            length = len(path.read_text().strip())
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"cannot read the token file {path} ({exc}): give a token file "
                "you can read, or a new path"
            ) from None
        if length < 16:  # what a storage node requires of its token (storage_node.server)
            raise ConfigError(
                f"the token in {path} is too short ({length} characters): a node needs at "
                f"least 16; remove the file and run dfs-cer storage-node token {path} again"
            )
        return done
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(16) + "\n")
    return "wrote"


def tighten_token(path: Path) -> bool:
    """Make an existing token file readable and writable by its owner only (whether it had to):
    anyone who can read the token can query and close the nodes' queries. A file of another
    user, or one this user cannot change, open to its group or others is refused."""
    info = path.stat()
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o077:
        return False
    if info.st_uid != os.getuid():
        raise StorageError(
            f"the token file {path} has mode {mode:04o} (readable by others) and belongs to "
            f"another user (uid {info.st_uid}): have its owner run chmod 600 {path}, or give "
            "a token file of your own"
        )
    try:
        os.chmod(path, 0o600)
    except OSError as exc:
        raise StorageError(
            f"the token file {path} has mode {mode:04o} (readable by others) and cannot be made "
            f"0600 ({exc.strerror or exc}): run chmod 600 {path}"
        ) from None
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


#: the lock ``up`` and ``down`` hold on a nodes directory (its holder's pid and command inside)
LOCK_FILE = "up.lock"
#: the processes an ``up`` under way has started (``down`` stops them if it never finished)
STARTED_FILE = "started.json"


@contextlib.contextmanager
def lock_dir(root: Path, command: str) -> Iterator[None]:
    """This process alone on the nodes directory ``root`` for the block (``command``: ``up`` or
    ``down``, named to whoever finds it taken): an exclusive ``flock`` on ``root/up.lock``, which
    the system releases when its process ends, so an ``up`` that died never blocks the next."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").split()
            pid = holder[0] if holder else "unknown"
            other = holder[1] if len(holder) > 1 else "up"
            raise StorageError(
                f"another dfs-cer storage-node {other} (pid {pid}) is using {root}: wait for it "
                "to finish, or use another --dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def started_pids(root: Path) -> list[int]:
    """The processes an ``up`` started in ``root`` and did not see through (its record)."""
    try:
        return [int(p) for p in json.loads((root / STARTED_FILE).read_text())]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"the record of started nodes {root / STARTED_FILE} is unreadable ({exc}); stop "
            "its storage node processes by hand and remove it"
        ) from None


def _record(root: Path, pids: list[int]) -> None:
    tmp = root / f"{STARTED_FILE}.tmp"
    tmp.write_text(json.dumps(pids))
    os.replace(tmp, root / STARTED_FILE)


def up(
    data: list[str],
    state_dir: str = DEFAULT_DIR,
    *,
    memory_budget: str | None = None,
    host: str | None = None,
    timeout: float = 300.0,
    progress: Callable[[str], None] | None = None,
    metrics: bool = False,
    notice: Callable[[str], None] | None = None,
) -> Nodes:
    """Start one node per entry of ``data`` in the background and write the nodes file, alone on
    the directory (:func:`lock_dir`); every process is recorded as soon as it is started, so
    ``down`` stops it even if this ``up`` never finishes. ``progress`` is told each step,
    ``notice`` that a token file open to others was made 0600."""
    root = Path(state_dir).resolve()
    with lock_dir(root, "up"):
        current = read_nodes(state_dir)
        earlier = [*(current.pids if current is not None else []), *started_pids(root)]
        running = [p for p in earlier if is_node(p)]
        if running:
            where = ", ".join(current.endpoints) if current is not None else "an unfinished up"
            raise StorageError(
                f"storage nodes from {root} are running ({where}; pids "
                f"{', '.join(map(str, running))}): stop them with dfs-cer storage-node down first"
            )
        token_file = root / TOKEN_FILE
        if write_token(token_file) == "tightened" and notice:
            notice(f"the token file {token_file} was readable by others: made it 0600")
        procs: list[subprocess.Popen[bytes]] = []
        try:
            nodes = _start(data, root, token_file, procs, memory_budget, host, metrics)
            endpoints, urls = _ready(data, procs, root, nodes[1], host, timeout, progress)
        except BaseException:
            _stop_all([p.pid for p in procs])
            (root / STARTED_FILE).unlink(missing_ok=True)
            raise
        started = Nodes(endpoints, str(token_file), [p.pid for p in procs], data, nodes[0], urls)
        tmp = nodes_path(state_dir).with_suffix(".tmp")
        tmp.write_text(started.to_json())
        os.replace(tmp, nodes_path(state_dir))
        (root / STARTED_FILE).unlink(missing_ok=True)  # the nodes file names them all now
        for path in nodes[1]:
            path.unlink(missing_ok=True)
        return started


def _start(
    data: list[str],
    root: Path,
    token_file: Path,
    procs: list[subprocess.Popen[bytes]],
    memory_budget: str | None,
    host: str | None,
    metrics: bool,
) -> tuple[list[str], list[Path]]:
    """Start a node per entry of ``data`` (appended to ``procs`` and recorded in ``root`` one by
    one); their logs and ready files."""
    logs: list[str] = []
    ready: list[Path] = []
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
        _record(root, [p.pid for p in procs])
        ready.append(ready_file)
        logs.append(str(log_path))
    return logs, ready


def _ready(
    data: list[str],
    procs: list[subprocess.Popen[bytes]],
    root: Path,
    ready: list[Path],
    host: str | None,
    timeout: float,
    progress: Callable[[str], None] | None,
) -> tuple[list[str], list[str]]:
    """The endpoints and metrics URLs of the started nodes, once each is ready."""
    endpoints: list[str] = []
    urls: list[str] = []
    deadline = time.monotonic() + timeout
    for i, path in enumerate(ready):
        if progress:
            progress(f"starting storage node {i + 1} of {len(data)} ({data[i]})")
        log = root / f"node-{i}.log"
        endpoint, metrics_port = _wait(procs[i], path, log, deadline, host, data[i])
        endpoints.append(endpoint)
        if metrics_port is not None:
            urls.append(f"http://127.0.0.1:{metrics_port}/metrics")
    return endpoints, urls


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


def _stop_all(pids: list[int], wait: float = 10.0) -> int:
    """SIGTERM every storage node of ``pids``, SIGKILL those still running after ``wait``
    seconds; how many were running."""
    mine = [p for p in dict.fromkeys(pids) if is_node(p)]
    for pid in mine:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    give_up = time.monotonic() + wait
    left = list(mine)
    while left and time.monotonic() < give_up:
        for pid in left:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)  # reap it when this process started it
        left = [p for p in left if is_node(p) and not _zombie(p)]
        if left:
            time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(mine)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


@dataclass(frozen=True)
class Stopped:
    """What ``down`` found and stopped: the nodes file (None when there was none), every process
    ``up`` started (the nodes file's and an unfinished ``up``'s) and how many were running."""

    nodes: Nodes | None
    pids: list[int]
    running: int


def down(state_dir: str = DEFAULT_DIR) -> Stopped:
    """Stop every process ``up`` started in ``state_dir`` (those of the nodes file and those an
    ``up`` that never finished recorded) and remove their files (the token stays for the next
    ``up``); alone on the directory, as ``up`` is."""
    root = Path(state_dir).resolve()
    if not root.is_dir():
        return Stopped(None, [], 0)
    with lock_dir(root, "down"):
        nodes = read_nodes(state_dir)
        pids = list(
            dict.fromkeys([*(nodes.pids if nodes is not None else []), *started_pids(root)])
        )
        running = _stop_all(pids)
        nodes_path(state_dir).unlink(missing_ok=True)
        (root / STARTED_FILE).unlink(missing_ok=True)
        return Stopped(nodes, pids, running)
