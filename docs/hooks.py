"""mkdocs hooks: pages written from the code as it stands (the settings, the protocol's calls)
replace their ``<!-- generated: ... -->`` markers at build time."""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any


def _comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment above each field of a dataclass, joined into one line."""
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        match = re.match(r"(\w+)\s*:", stripped)
        if match and pending:
            out[match.group(1)] = " ".join(pending)
        if not stripped.startswith("#"):
            pending = []
    return out


def _value(value: Any) -> str:
    if isinstance(value, str):
        return f'`"{value}"`' if value else '`""`'
    if isinstance(value, tuple | list):
        return "`[" + ", ".join(repr(v) for v in value) + "]`"
    return f"`{value!r}`".replace("None", "unset")


def settings() -> str:
    from dfs_cer.config import Config

    lines = []
    for section in dataclasses.fields(Config):
        cls = section.default_factory  # type: ignore[misc]
        instance = cls()
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        lines += [
            f"## `[{section.name}]`",
            "",
            doc,
            "",
            "| key | default | what |",
            "|---|---|---|",
        ]
        notes = _comments(cls)
        for f in dataclasses.fields(instance):
            what = notes.get(f.name, "").replace("|", "\\|")
            env = f"`DFS_CER__{section.name.upper()}__{f.name.upper()}`"
            lines.append(
                f"| `{f.name}` | {_value(getattr(instance, f.name))} | {what} (env {env}) |"
            )
        lines.append("")
    return "\n".join(lines)


def actions() -> str:
    from dfs_cer.transport.actions import ACTIONS

    lines = [
        "| call | Flight call | served by | request | reply | outside a query |",
        "|---|---|---|---|---|---|",
    ]
    for a in ACTIONS.values():
        request = a.request.__name__ if a.request else "(checked by the handler)"
        reply = a.reply.__name__ if a.reply else "Arrow stream"
        lines.append(
            f"| `{a.name}` | {a.call} | `{a.family}.{a.handler}` | `{request}` | `{reply}` | "
            f"{'yes' if a.lifecycle else 'no'} |"
        )
    return "\n".join(lines)


GENERATED = {"settings": settings, "actions": actions}


def on_page_markdown(markdown: str, **_: Any) -> str:
    def fill(match: re.Match[str]) -> str:
        return GENERATED[match.group(1)]()

    return re.sub(r"<!-- generated: (\w+) -->", fill, markdown)
