"""Pure packages (events, query, pattern, match, filters, plan) import no pyspark, boto3 or
pyarrow.fs.

Checked two ways: statically over every import statement in those packages (including imports
inside functions), and at run time in a fresh interpreter after importing every module.

Layers, lowest first: dfs_cer.events (time values, canonical order, identity) imports only
errors-level modules; the packages the engines build on (events, query, pattern, filters, plan,
io) import nothing from dfs_cer.match.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE = ["events", "query", "pattern", "match", "filters", "plan"]
FORBIDDEN = ("pyspark", "boto3", "botocore", "pyarrow.fs", "pyarrow._fs", "pyarrow.dataset", "pyarrow._s3fs")


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / "dfs_cer" / package).rglob("*.py"))


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


@pytest.mark.parametrize("package", PURE)
def test_static_imports(package: str) -> None:
    files = _modules(package)
    assert files, f"dfs_cer/{package} has no modules"
    for path in files:
        bad = [n for n in _imports(path) if n.startswith(FORBIDDEN)]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}: keep I/O in dfs_cer/io, storage_node, spark_jobs"


def test_runtime_imports() -> None:
    modules = []
    for package in PURE:
        for path in _modules(package):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules.append(".".join(parts))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "", f"pure packages pulled in: {out.stdout.strip()}"


def _package(module: str) -> str:
    """The package a module belongs to: dfs_cer.<sub> for subpackages, else the module itself."""
    parts = module.split(".")
    if parts[0] == "dfs_cer" and len(parts) > 2:
        return ".".join(parts[:2])
    return module if parts[0] == "dfs_cer" else parts[0]


def test_no_private_names_across_packages() -> None:
    """Helpers used by another package have public names (no `from other import _helper`)."""
    bad = []
    for top in ("dfs_cer", "storage_node", "bench", "spark_jobs", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            here = ".".join(p for p in rel.parts if p != "__init__")
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                    continue
                if _package(node.module) == _package(here):
                    continue
                bad += [f"{rel}: from {node.module} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []


#: the only dfs_cer modules dfs_cer.events may import: it is the lowest layer
EVENTS_MAY_IMPORT = ("dfs_cer.events", "dfs_cer.errors", "dfs_cer.config")
#: packages below the engines: no import of dfs_cer.match (the arrows must not run back up)
BELOW_MATCH = ["events", "query", "pattern", "filters", "plan", "io"]


def _dfs_cer_imports(path: Path) -> list[str]:
    """The dfs_cer modules a file imports (``from dfs_cer import x`` as ``dfs_cer.x``)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [f"dfs_cer.{a.name}" for a in node.names] if node.module == "dfs_cer" else [node.module]
    return [n for n in names if n == "dfs_cer" or n.startswith("dfs_cer.")]


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_events_imports_nothing_above_it() -> None:
    bad = [f"{path.relative_to(ROOT)}: {name}" for path in _modules("events")
           for name in _dfs_cer_imports(path) if not _within(name, EVENTS_MAY_IMPORT)]
    assert bad == [], "dfs_cer.events is the lowest layer: it imports only errors/config-level modules"


@pytest.mark.parametrize("package", BELOW_MATCH)
def test_packages_below_the_engines_do_not_import_match(package: str) -> None:
    bad = [f"{path.relative_to(ROOT)}: {name}" for path in _modules(package)
           for name in _dfs_cer_imports(path) if _within(name, ("dfs_cer.match",))]
    assert bad == [], f"dfs_cer.{package} lies below dfs_cer.match (move shared code to dfs_cer.events)"
