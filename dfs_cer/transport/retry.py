"""One way to try a call again while a storage node answers with a passing condition (an error
code in a given set), with growing, jittered pauses, within a deadline."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection
from typing import TypeVar

from dfs_cer.errors import DfsCerError

T = TypeVar("T")

#: the first pause between two tries and the longest one (seconds; doubled after each try)
FIRST_PAUSE = 0.05
MAX_PAUSE = 1.0


def retry_on(
    codes: Collection[str], call: Callable[[], T], deadline: Callable[[], float | None]
) -> T:
    """``call()`` again while it fails with a :class:`DfsCerError` whose ``code`` is in ``codes``
    and the next try would start before ``deadline()`` (``time.monotonic()`` seconds, read after
    each failure; None: no deadline known, the error is raised). Any other error, or one past the
    deadline, is raised as it is."""
    pause = FIRST_PAUSE
    while True:
        try:
            return call()
        except DfsCerError as exc:
            limit = deadline()
            if exc.code not in codes or limit is None or time.monotonic() + pause >= limit:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(MAX_PAUSE, pause * 2)
