"""The CER engine for selection strategies (skip-till-any-match, skip-till-next-match, strict
contiguity) over SEQ patterns with Kleene+: the engine (``engine``), its compiled kernels
(``kernels``) and its view of the PATTERN (``pattern``)."""
