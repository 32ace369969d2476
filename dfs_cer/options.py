"""The option sets, each defined once: settings (:mod:`dfs_cer.config`), the ``dfs-cer``
command line and the modules that check a value all read them from here.

Each set is a ``Literal`` type (for the typed settings) and the tuple of its values in the
same order (for ``click.Choice``, messages and membership checks).
"""

from __future__ import annotations

from typing import Literal, get_args

#: unit of an integer ORDER BY column (epoch seconds, milliseconds, ...)
TimeUnit = Literal["ns", "us", "ms", "s"]
#: compute-node pull strategies (``dfs_v1``, ``dfs_v2``, ``swf_only``: the paper's ablations)
Strategy = Literal[
    "pull_all",
    "push_down",
    "push_pull",
    "naive_dfs",
    "dfs",
    "dfs_paper",
    "swf_only",
    "dfs_v1",
    "dfs_v2",
]
#: when a DFS round trip runs
CostModel = Literal["adaptive", "always_on", "always_off", "naive", "fixed"]
#: codecs of a pull's Arrow IPC stream
Compression = Literal["zstd", "lz4", "none"]
#: CER selection strategies
Selection = Literal["skip_till_any_match", "skip_till_next_match", "strict_contiguity"]
#: Kleene+ output under a CER selection: every subset, or maximal sets
Kleene = Literal["all", "maximal"]
#: what the matcher does at ``max_matches``
OnLimit = Literal["error", "truncate"]

TIME_UNITS: tuple[TimeUnit, ...] = get_args(TimeUnit)
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
COST_MODELS: tuple[CostModel, ...] = get_args(CostModel)
COMPRESSIONS: tuple[Compression, ...] = get_args(Compression)
SELECTIONS: tuple[Selection, ...] = get_args(Selection)
KLEENE: tuple[Kleene, ...] = get_args(Kleene)
ON_LIMIT: tuple[OnLimit, ...] = get_args(OnLimit)
