"""Planning on the compute node: variable order and the round-trip cost model. Pure; no I/O."""
