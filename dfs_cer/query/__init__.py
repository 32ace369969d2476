"""SQL front end: ``MATCH_RECOGNIZE`` text -> frozen query model -> analysis."""

from dfs_cer.query.analyze import Analysis, Equality, Role, VariableInfo, analyze
from dfs_cer.query.model import Query
from dfs_cer.query.parser import parse

__all__ = ["Analysis", "Equality", "Query", "Role", "VariableInfo", "analyze", "parse"]
