"""Matching engines (compute node): the SQL:2016 row-pattern program VM and the CER
recomputation engine. Pure: Arrow/numpy in, Arrow/numpy out; no I/O."""
