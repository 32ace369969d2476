"""Pure packages (query, pattern, match, filters, plan) import no pyspark, boto3 or pyarrow.fs.

Checked two ways: statically over every import statement in those packages (including imports
inside functions), and at run time in a fresh interpreter after importing every module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE = ["query", "pattern", "match", "filters", "plan"]
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
