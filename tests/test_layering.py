"""Layers and import rules, checked by import-linter and by what it cannot express.

The layer order, "storage_node and spark_jobs above the core", "pure logic imports no pyspark or
boto3" and "no import cycles inside a package" are import-linter contracts in pyproject.toml
([tool.importlinter]); :func:`test_contracts` runs them, and
:func:`test_back_arrow_breaks_a_contract` shows that an upward import in a copy of the tree fails
them. import-linter sees external packages only by their top-level name, so "no pyarrow.fs /
pyarrow.dataset in pure logic" is checked here, statically over every import statement (including
imports inside functions) and at run time in a fresh interpreter; so is "no private names imported
across packages".
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE = ["events", "query", "pattern", "match", "filters", "plan"]
#: submodules import-linter cannot tell from pyarrow itself (pyspark, boto3: contract "pure-no-io")
FORBIDDEN = ("pyarrow.fs", "pyarrow._fs", "pyarrow.dataset", "pyarrow._s3fs")
LINT = (
    "import sys; from importlinter.cli import lint_imports_command; "
    "lint_imports_command(sys.argv[1:])"
)


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
        assert not bad, (
            f"{path.relative_to(ROOT)} imports {bad}: keep I/O in dfs_cer/io, storage_node, "
            "spark_jobs"
        )


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
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
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
                bad += [
                    f"{rel}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert bad == []


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the tree at ``root`` (its pyproject.toml, its packages first on the
    path)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        check=False,
    )


def test_contracts() -> None:
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("module", "imports", "contract"),
    [
        ("dfs_cer/filters/back_arrow.py", "import dfs_cer.strategies", "layer order"),
        ("dfs_cer/query/back_arrow.py", "import storage_node.server", "above dfs_cer's core"),
        ("dfs_cer/plan/back_arrow.py", "import pyspark", "imports no pyspark"),
        ("dfs_cer/query/model_back.py", "import dfs_cer.query.root", "no import cycles"),
    ],
)
def test_back_arrow_breaks_a_contract(
    tmp_path: Path, module: str, imports: str, contract: str
) -> None:
    """An upward import added to a copy of the tree fails ``make lint`` (and test_contracts)."""
    for top in ("dfs_cer", "storage_node", "spark_jobs"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint_imports(tmp_path).returncode == 0
    (tmp_path / module).write_text(f"{imports}\n")
    if module.endswith("model_back.py"):  # a cycle: the new module and the root import each other
        root = tmp_path / "dfs_cer/query/root.py"
        root.write_text(root.read_text() + "\nimport dfs_cer.query.model_back  # noqa: E402\n")
    out = _lint_imports(tmp_path)
    assert out.returncode != 0 and "BROKEN" in out.stdout, out.stdout + out.stderr
    assert contract in out.stdout
