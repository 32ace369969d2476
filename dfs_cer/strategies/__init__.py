"""Pull strategies on the compute node: pull_all, push_down, push_pull and dfs."""

from dfs_cer.strategies.base import PullResult, Round, Trace
from dfs_cer.strategies.pull import STRATEGIES, pull, run
from dfs_cer.strategies.request import PullRequest

__all__ = ["STRATEGIES", "PullRequest", "PullResult", "Round", "Trace", "pull", "run"]
