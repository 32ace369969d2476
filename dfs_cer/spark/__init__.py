"""Spark front door: the driver is the compute node, executors match independent units."""

from dfs_cer.spark.api import match_recognize, recognize, recognize_many
from dfs_cer.spark.match import Recognition, match_events
from dfs_cer.spark.session import local_session
from dfs_cer.spark.situations import situations

__all__ = [
    "Recognition",
    "local_session",
    "match_events",
    "match_recognize",
    "recognize",
    "recognize_many",
    "situations",
]
