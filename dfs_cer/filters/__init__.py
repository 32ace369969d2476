"""Membership structures of the dual-filtering strategy: shrinking window filter, window-wise
join filter and the exact interval sets they stand in for. Pure numpy; no I/O."""
