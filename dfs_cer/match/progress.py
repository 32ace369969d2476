"""Progress of a long matcher run, for whoever shows it (the CLI): the matcher's compiled loop
writes where it is into its ``stop`` array and a thread reads it about every second."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MatchProgress:
    """Where a run of the row-pattern matcher is: partitions and rows matched so far (of the
    run's), matches found before the current partition, thread steps taken."""

    partitions: int
    partitions_done: int
    rows: int
    rows_done: int
    matches: int
    steps: int
    #: the matcher is still being compiled (its first run in a fresh install)
    compiling: bool = False

    @property
    def finished(self) -> bool:
        return self.partitions_done == self.partitions

    def line(self) -> str:
        if self.finished:
            return f"matching: run ended after {self.steps:,} thread steps"
        if self.compiling:
            return (
                "matching: compiling the matcher (once after an install, a minute or two; "
                "dfs-cer warm does it ahead)"
            )
        left = self.partitions - self.partitions_done
        return (
            f"matching: {self.rows_done:,} of {self.rows:,} rows, {left:,} of "
            f"{self.partitions:,} partitions left, {self.matches:,} matches so far "
            f"({self.steps:,} thread steps)"
        )


#: who receives a :class:`MatchProgress` about every second once a run of the matcher has
#: lasted a second (the CLI prints it; runs in any thread of the process report to it)
_LISTENERS: list[Callable[[MatchProgress], None]] = []


@contextmanager
def listening(listener: Callable[[MatchProgress], None]) -> Iterator[None]:
    """Send the progress of every matcher run in this process to ``listener`` while the block
    runs."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


#: seconds before the first report, and between two reports
FIRST_REPORT = 1.0
EVERY = 1.0


@contextmanager
def reporting(
    stop: Any,
    bounds: Any,
    at: int,
    found: int,
    steps: int,
    compiled: Callable[[], bool] | None = None,
) -> Iterator[None]:
    """While the block runs, report ``stop[at]`` (the partition the run is at), ``stop[found]``
    (matches before it) and ``stop[steps]`` against partition ``bounds`` to the listener (see
    :func:`listening`), if any; ``compiled`` says whether the matcher's code is ready (until it
    is, the report says it is being compiled)."""
    listener = _LISTENERS[-1] if _LISTENERS else None
    if listener is None or len(bounds) < 2:
        yield
        return
    done = threading.Event()
    began = time.monotonic()

    def loop() -> None:
        wait = FIRST_REPORT
        while not done.wait(max(0.0, wait)):
            p = min(int(stop[at]), len(bounds) - 2)
            listener(
                MatchProgress(
                    partitions=len(bounds) - 1,
                    partitions_done=p,
                    rows=int(bounds[-1] - bounds[0]),
                    rows_done=int(bounds[p] - bounds[0]),
                    matches=int(stop[found]),
                    steps=int(stop[steps]),
                    compiling=compiled is not None and not compiled(),
                )
            )
            wait = EVERY - (time.monotonic() - began) % EVERY

    thread = threading.Thread(target=loop, name="match progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if time.monotonic() - began >= FIRST_REPORT:  # reported: say the run ended
            n = len(bounds) - 1
            rows = int(bounds[-1] - bounds[0])
            listener(MatchProgress(n, n, rows, rows, int(stop[found]), int(stop[steps])))
