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


class TextOutput(Output):
    def __init__(self) -> None:
        self.console = Console(highlight=False, soft_wrap=True)

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


class JsonOutput(Output):
    def _emit(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")

    def explain(self, data: dict[str, Any], lines: list[str]) -> None:
        self._emit(data)

    def mapping(self, title: str, data: dict[str, Any]) -> None:
        self._emit(data)

    def message(self, text: str) -> None:
        self._emit({"message": text})


def make_output(kind: str) -> Output:
    return JsonOutput() if kind == "json" else TextOutput()
