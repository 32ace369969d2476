"""What a storage node process loads, and what it never does.

A node at rest loads only what serving needs (Flight, the store, the query states); the query
handlers, the SQL parser and the compiled filter kernels load with the first query call (see
``storage.warm_up``). pandas never loads in a node process: pyarrow imports it only to check
whether a value it converts is a DataFrame (51 MB per process), and nodes never get one; pyarrow
runs as if pandas were not installed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType

#: modules a node at rest must not hold (reported by ``stats``; a test checks them)
HEAVY = (
    "pandas",
    "pyspark",
    "duckdb",
    "sqlglot",
    "matplotlib",
    "numba",
    "llvmlite",
    "boto3",
    "pyiceberg",
    "scipy",
)

#: modules hidden from a node process (imported, they raise ModuleNotFoundError)
HIDDEN = ("pandas",)


class _Hidden(importlib.abc.MetaPathFinder):
    """Refuses ``names`` (and their submodules) like an uninstalled package."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", 1)[0] in self.names:
            raise ModuleNotFoundError(
                f"{fullname} is not loaded in a storage node process (storage_node.lean.HIDDEN)",
                name=fullname,
            )
        return None


def hide(names: Sequence[str] = HIDDEN) -> bool:
    """Make ``names`` unimportable in this process (the node's ``main`` calls it before the store
    loads); False, and nothing hidden, when one of them is already loaded."""
    if any(n in sys.modules for n in names):
        return False
    sys.meta_path.insert(0, _Hidden(names))
    return True


def loaded_heavy() -> list[str]:
    """The modules of :data:`HEAVY` this process has loaded."""
    return [m for m in HEAVY if m in sys.modules]


def resident_bytes() -> int | None:
    """This process's resident memory (VmRSS), None where ``/proc`` is missing."""
    try:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
