"""Spark front door: the driver is the compute node, executors match independent units."""

from dfs_cer.spark.match import match_events, match_recognize
from dfs_cer.spark.session import local_session

__all__ = ["local_session", "match_events", "match_recognize"]
