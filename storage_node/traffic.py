"""What a storage node served, per action and per error code (read by its metrics endpoint,
:mod:`storage_node.metrics`)."""

from __future__ import annotations

import threading


class Traffic:
    """Calls, bytes in and bytes out per action, and errors per code, counted as they happen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.errors: dict[str, int] = {}

    def count(self, action: str, bytes_in: int, bytes_out: int) -> None:
        with self._lock:
            self.calls[action] = self.calls.get(action, 0) + 1
            self.bytes_in[action] = self.bytes_in.get(action, 0) + bytes_in
            self.bytes_out[action] = self.bytes_out.get(action, 0) + bytes_out

    def error(self, code: str) -> None:
        with self._lock:
            self.errors[code] = self.errors.get(code, 0) + 1

    def snapshot(self) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self.calls), dict(self.bytes_in), dict(self.bytes_out), dict(self.errors)
