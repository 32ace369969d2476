"""Data generators (the paper's synthetic data; later CRIMES-, CITIBIKE- and CLUSTER-shaped)."""

from dfs_cer.datasets.synthetic import synthetic_events, synthetic_queries

__all__ = ["synthetic_events", "synthetic_queries"]
