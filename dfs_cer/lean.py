"""Modules a process never loads: :func:`hide` makes them fail to import like uninstalled ones.

pyarrow imports pandas (a fifth of a second and ~50 MB) only to check whether a value it
converts is a DataFrame, the first time it converts a Python list, whenever pandas is
installed. A storage node never gets a DataFrame, nor does ``dfs-cer query`` matching in its own
process, so both hide pandas and pyarrow takes its path for an environment without it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType


class _Hidden(importlib.abc.MetaPathFinder):
    """Refuses ``names`` (and their submodules) like an uninstalled package."""

    def __init__(self, names: Sequence[str], where: str) -> None:
        self.names, self.where = tuple(names), where

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", 1)[0] in self.names:
            raise ModuleNotFoundError(f"{fullname} is not loaded in {self.where}", name=fullname)
        return None


def hide(names: Sequence[str], where: str) -> bool:
    """Make ``names`` unimportable in this process (``where`` names the process in the error);
    False, and nothing hidden, when one of them is already loaded or hidden."""
    if any(n in sys.modules for n in names) or any(
        isinstance(f, _Hidden) and set(names) <= set(f.names) for f in sys.meta_path
    ):
        return False
    sys.meta_path.insert(0, _Hidden(names, where))
    return True
