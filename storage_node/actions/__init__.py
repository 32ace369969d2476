"""The storage node's actions (DESIGN.md "DFS protocol"), one module per family of the protocol
table (:mod:`dfs_cer.transport.protocol`)."""
