"""SQL front end: ``MATCH_RECOGNIZE`` text -> frozen query model -> analysis."""

from dfs_cer.query.analyze import Analysis, Equality, Role, VariableInfo, analyze
from dfs_cer.query.parser import parse
from dfs_cer.query.root import Query

__all__ = ["Analysis", "Equality", "Query", "Role", "VariableInfo", "analyze", "parse"]
