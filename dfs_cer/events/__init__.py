"""Events: time values, the canonical order of rows (sort, partitions, ties, identical runs) and
row and match identity. The lowest package of dfs_cer: used by the planner, io, the storage nodes
and both engines, it imports nothing from dfs_cer above it (only errors and numpy/pyarrow)."""
