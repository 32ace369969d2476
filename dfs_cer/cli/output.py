"""CLI output: one interface, a text (rich) and a JSON implementation."""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from typing import Any

from rich.console import Console


class Output(ABC):
    """Where a command's results go."""

    @abstractmethod
    def explain(self, data: dict[str, Any], lines: list[str]) -> None: ...

    @abstractmethod
    def mapping(self, title: str, data: dict[str, Any]) -> None: ...

    @abstractmethod
    def message(self, text: str) -> None: ...

    @abstractmethod
    def table(self, title: str, rows: list[dict[str, Any]]) -> None:
        """Rows of one shape (dicts with the same keys, in column order)."""


class TextOutput(Output):
    def __init__(self) -> None:
        self.console = Console(highlight=False, soft_wrap=True)
        if not self.console.is_terminal:
            self.console.width = 140  # tables in files and pipes: no folding at 80 columns

    def explain(self, data: dict[str, Any], lines: list[str]) -> None:
        for line in lines:
            self.console.print(line, markup=False)

    def mapping(self, title: str, data: dict[str, Any]) -> None:
        self.console.print(f"[bold]{title}[/bold]")
        for section, values in data.items():
            if isinstance(values, dict):
                self.console.print(f"[{section}]", markup=False)
                for key, value in values.items():
                    self.console.print(f"  {key} = {value!r}", markup=False)
            else:
                self.console.print(f"{section} = {values!r}", markup=False)

    def message(self, text: str) -> None:
        self.console.print(text, markup=False)

    def table(self, title: str, rows: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_edge=False)
        columns = list(rows[0]) if rows else []
        for c in columns:
            numeric = bool(rows) and all(isinstance(r[c], int | float) for r in rows)
            table.add_column(c, justify="right" if numeric else "left", overflow="fold")
        for r in rows:
            table.add_row(*(_cell(r[c]) for c in columns))
        self.console.print(table)


class JsonOutput(Output):
    def _emit(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")

    def explain(self, data: dict[str, Any], lines: list[str]) -> None:
        self._emit(data)

    def mapping(self, title: str, data: dict[str, Any]) -> None:
        self._emit(data)

    def message(self, text: str) -> None:
        self._emit({"message": text})

    def table(self, title: str, rows: list[dict[str, Any]]) -> None:
        self._emit({"title": title, "rows": rows})


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


def make_output(kind: str) -> Output:
    return JsonOutput() if kind == "json" else TextOutput()
