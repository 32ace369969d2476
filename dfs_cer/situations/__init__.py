"""Situations (maximal runs where a condition holds) and Allen-relation patterns over them
(TPStream's operator, offline)."""

from dfs_cer.situations.parser import parse_situations
from dfs_cer.situations.run import match_situations, outer, run_situations

__all__ = ["match_situations", "outer", "parse_situations", "run_situations"]
