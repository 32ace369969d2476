"""Error codes on the wire.

A storage node turns every :class:`~dfs_cer.errors.DfsCerError` into a Flight error whose
message is ``"<class name>: <message>"`` and whose ``extra_info`` is ``{"code": <the error's
code>}`` (JSON); the compute node reads the code back (:func:`error_code`) and decides on it,
never on the message's words. Each error class names its code (``DfsCerError.code``).
"""

from __future__ import annotations

import json
from typing import Any


def code_info(code: str) -> bytes:
    """The ``extra_info`` bytes that carry ``code``."""
    return json.dumps({"code": code}).encode()


def error_code(exc: Any) -> str | None:
    """The node's error code carried in a Flight error's ``extra_info`` (None when there is
    none)."""
    info = getattr(exc, "extra_info", None)
    if not info:
        return None
    try:
        code = json.loads(info).get("code")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, str) else None
