"""dfs-cer's Spark data source under the name Spark looks up installed Python data sources by
(a ``pyspark_*`` package with a ``DefaultSource``): ``spark.read.format("dfs_cer")`` works
without registering it. See :mod:`dfs_cer.spark.source`."""

from dfs_cer.spark.source import DfsCerSource as DefaultSource

__all__ = ["DefaultSource"]
