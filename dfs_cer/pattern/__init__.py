"""Row pattern IR (``PATTERN`` clause), its parser and structural properties."""

from dfs_cer.pattern.ir import RowPattern, to_text
from dfs_cer.pattern.parser import parse_pattern

__all__ = ["RowPattern", "parse_pattern", "to_text"]
