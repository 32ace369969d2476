"""The nodes file ``dfs-cer storage-node up`` writes (``.dfs-cer/nodes/nodes.json``): the
endpoints, the token file, the processes and their logs. ``dfs-cer query`` and the Spark data
source read it when no endpoints are given."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from dfs_cer.errors import ConfigError

#: where ``up`` keeps its files unless told (beside ``.dfs-cer/runs``)
DEFAULT_DIR = ".dfs-cer/nodes"
NODES_FILE = "nodes.json"
TOKEN_FILE = "token"


@dataclass(frozen=True)
class Nodes:
    """What ``up`` started: read back by ``query``, ``status`` and ``down``."""

    endpoints: list[str]
    token_file: str
    pids: list[int]
    data: list[str]
    logs: list[str]
    #: each node's Prometheus endpoint (``up --metrics``), else empty
    metrics: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2) + "\n"


def nodes_path(state_dir: str) -> Path:
    return Path(state_dir) / NODES_FILE


def read_nodes(state_dir: str) -> Nodes | None:
    """The nodes file under ``state_dir``, or None when there is none."""
    path = nodes_path(state_dir)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        return Nodes(
            endpoints=[str(e) for e in doc["endpoints"]],
            token_file=str(doc["token_file"]),
            pids=[int(p) for p in doc["pids"]],
            data=[str(d) for d in doc["data"]],
            logs=[str(x) for x in doc["logs"]],
            metrics=[str(m) for m in doc.get("metrics", [])],
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"the nodes file {path} is unreadable ({exc}); remove it or run dfs-cer "
            "storage-node down"
        ) from exc
