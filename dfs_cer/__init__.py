"""dfs-cer: offline complex event recognition over event logs in object or block storage.

``dfs_cer.parse(sql)`` turns a ``MATCH_RECOGNIZE`` query into a frozen :class:`Query`;
``dfs_cer.analyze(query, schema)`` classifies its conditions for the pull strategies.
"""

from dfs_cer.errors import DfsCerError, QueryError
from dfs_cer.query import Analysis, Query, analyze, parse

__version__ = "0.1.0"

__all__ = ["Analysis", "DfsCerError", "Query", "QueryError", "__version__", "analyze", "parse"]
