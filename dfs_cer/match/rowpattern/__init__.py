"""The SQL:2016 row-pattern engine: PATTERN compiled to an instruction program run by a VM over
label masks (``program``, ``vm``), DEFINE conditions (``conditions``), MEASURES and aggregates
(``measures``, ``aggregates``) and the engine that ties them over an Arrow table (``engine``)."""
