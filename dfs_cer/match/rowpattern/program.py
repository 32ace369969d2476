"""The row-pattern VM's instruction program (compiled from the PATTERN by
:mod:`dfs_cer.match.rowpattern.compiler`).

The matcher VM runs programs of these instructions; it sees label ids and row positions, never
rows. Preference order is the order of ``SPLIT`` targets: the first target is tried first.

======  ==========================  =============================================
opcode  operands                    meaning
======  ==========================  =============================================
LABEL   label id                    consume one row if it can be labelled ``label``
JUMP    target                      continue at ``target``
SPLIT   first, second               fork: ``first`` is preferred over ``second``
START   -                           succeed only at the first row of the partition (``^``)
END     -                           succeed only after the last row of the partition (``$``)
EXCL_IN -                           rows consumed from here are excluded from ALL ROWS output
EXCL_OUT -                          end of an exclusion
DONE    -                           a match ends here
======  ==========================  =============================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LABEL, JUMP, SPLIT, START, END, EXCL_IN, EXCL_OUT, DONE = range(8)
NAMES = ["LABEL", "JUMP", "SPLIT", "START", "END", "EXCL_IN", "EXCL_OUT", "DONE"]


@dataclass(frozen=True)
class Program:
    """Instruction arrays (``op[i]``, ``a[i]``, ``b[i]``) and the label names by id."""

    op: np.ndarray
    a: np.ndarray
    b: np.ndarray
    labels: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.op.size)

    def lines(self) -> list[str]:
        """Readable listing, one instruction per line: ``3: SPLIT 4, 6``."""
        out = []
        for i, (op, a, b) in enumerate(
            zip(self.op.tolist(), self.a.tolist(), self.b.tolist(), strict=True)
        ):
            if op == LABEL:
                out.append(f"{i}: LABEL {self.labels[a]}")
            elif op == JUMP:
                out.append(f"{i}: JUMP {a}")
            elif op == SPLIT:
                out.append(f"{i}: SPLIT {a}, {b}")
            else:
                out.append(f"{i}: {NAMES[op]}")
        return out
