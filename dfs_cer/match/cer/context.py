"""What one CER engine run works on, shared by its parts (:mod:`dfs_cer.match.cer`): the sorted
events with their times and partitions, the pattern's items, the time window and tie rule, and
the storage node's work that bounds the run (checked between steps, charged for the partial
matches before they are made)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.match.cer.kernels import expand_pairs, expand_ranges
from dfs_cer.match.cer.pattern import Item
from dfs_cer.work import CHECK_EVERY, Work


class Context:
    """The events (sorted by partition and time: ``ts``, partition ``bounds`` and each row's
    partition ``row_part``) and the pattern's ``items`` one engine matches."""

    def __init__(
        self,
        table: pa.Table,
        ts: np.ndarray,
        bounds: np.ndarray,
        row_part: np.ndarray,
        items: list[Item],
        window: int | None,
        tie: int,
        unordered: bool,
        work: Work | None,
    ) -> None:
        self.table, self.ts, self.bounds, self.row_part = table, ts, bounds, row_part
        self.items = items
        self.window = window
        self.tie = tie  # 1: equal times never chain across variables; 0: they may (relaxed)
        self.unordered = unordered
        self.work = work  # a storage node's bounds on the run (None: unbounded)
        self.index = {it.name: i for i, it in enumerate(items)}
        self.kleene = {it.name for it in items if it.kleene}
        self.negated = {it.name for it in items if it.negated}
        self._held = 0  # bytes of partial matches charged to ``work``

    def check(self, step: int = 0) -> None:
        """Check the work (deadline, cancellation) and Ctrl-C every :data:`CHECK_EVERY` steps."""
        if step % CHECK_EVERY == 0:
            interrupt.check()
            if self.work is not None:
                self.work.check()

    def hold(self, nbytes: int) -> None:
        """Charge the partial matches about to be made (``nbytes``) in place of those held."""
        if self.work is None:
            return
        if nbytes > self._held:
            self.work.charge(nbytes - self._held)
        else:
            self.work.uncharge(self._held - nbytes)
        self._held = nbytes

    def expand(
        self,
        lo_row: np.ndarray,
        hi_row: np.ndarray,
        t_lo: np.ndarray,
        t_hi: np.ndarray,
        cand: np.ndarray,
        width: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The band join of partial matches (``width`` bound variables) with ``cand``, its pairs
        counted and charged before they are made."""
        first, last = expand_ranges(lo_row, hi_row, t_lo, t_hi, cand, self.ts[cand])
        if self.work is not None:
            pairs = int((last - first).sum())
            # the pairs, the partial matches gathered through them, and a condition's masks
            self.hold(pairs * 8 * (2 * width + 4))
        return expand_pairs(first, last, cand)
