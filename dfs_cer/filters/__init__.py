"""Membership structures of the dual-filtering strategy (paper §IV-B, §V).

- :class:`ShrinkingWindowFilter` (SWF): approximate time interval set, cuckoo-hashed windows
  with slice bitmaps; O(1) insert and lookup; shrinks over round trips.
- :class:`WindowJoinFilter` (WJF): Bloom filter over (attribute value, window id) pairs for
  equality conditions between variables.
- :class:`IntervalSet` and :class:`WindowKeySet`: the structures they replace in naive-DFS and the
  ablations; :class:`JoinSet`: the exact ground truth for the join filter in tests.

Pure numpy/numba: arrays in, arrays or bytes out, no I/O.
"""

from dfs_cer.filters.intervals import IntervalSet
from dfs_cer.filters.joinset import JoinSet
from dfs_cer.filters.keys import KeyKind, join_kind
from dfs_cer.filters.keyset import WindowKeySet
from dfs_cer.filters.swf import RefreshTags, ShrinkingWindowFilter, eq1_offsets
from dfs_cer.filters.wjf import WindowJoinFilter

__all__ = [
    "IntervalSet",
    "JoinSet",
    "KeyKind",
    "RefreshTags",
    "ShrinkingWindowFilter",
    "WindowJoinFilter",
    "WindowKeySet",
    "eq1_offsets",
    "join_kind",
]
