"""What a storage node process loads, and what it never does.

A node at rest loads only what serving needs (Flight, the store, the query states); the query
handlers, the SQL parser and the compiled filter kernels load with the first query call (see
``storage.warm_up``). pandas never loads in a node process: pyarrow imports it only to check
whether a value it converts is a DataFrame (51 MB per process), and nodes never get one; pyarrow
runs as if pandas were not installed. Arrow allocates from jemalloc, which hands freed pages back
to the system (its decay), unless ``ARROW_DEFAULT_MEMORY_POOL`` names another pool: with
mimalloc, pyarrow's default, a node at rest held 26 MB more and one that loaded its rows kept
the load's high-water mark (see "A fleet on one machine" in bench/RESULTS.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from dfs_cer.lean import hide as hide_modules

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


def hide(names: Sequence[str] = HIDDEN) -> bool:
    """Make ``names`` unimportable in this process (the node's ``main`` calls it before the store
    loads); False, and nothing hidden, when one of them is already loaded."""
    return hide_modules(names, "a storage node process (storage_node.lean.HIDDEN)")


#: glibc's mallopt parameter: allocations from this size on are mapped (and unmapped when freed)
_M_MMAP_THRESHOLD = -3


def tune_memory() -> str:
    """Make jemalloc Arrow's default pool in this process (unless ``ARROW_DEFAULT_MEMORY_POOL``
    chose one, or this pyarrow lacks it), and fix glibc's mmap threshold at 128 KiB so numpy's
    large temporaries (index builds) go back to the system when freed (glibc otherwise raises
    the threshold after the first such free and keeps later ones in its heap); the pool's
    name."""
    import ctypes
    import ctypes.util

    import pyarrow as pa

    with contextlib.suppress(OSError, AttributeError, TypeError):  # not glibc: left as it is
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        with contextlib.suppress(NotImplementedError):  # built without jemalloc: the default
            pa.set_memory_pool(pa.jemalloc_memory_pool())
            # freed pages go back at once: a load's transient copies do not stay resident
            pa.jemalloc_set_decay_ms(0)
    return pa.default_memory_pool().backend_name


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
