"""The documentation's examples run: each page's console and Python blocks (see
:mod:`tests.fixtures.docs`), in order, in a new directory, as a reader types them. Every command
succeeds (or fails, where the page shows its error) and prints the output the page shows (a
command shown without output may print anything). With ``DFS_CER_DOCS_REGENERATE=1`` a shown
output that differs, or is not shown, is rewritten with the real one instead (then read the
diff)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.docs import HOME, Block, blocks, masked, normal, shows, steps

DOCS = Path(__file__).resolve().parents[1] / "docs"
REGENERATE = os.environ.get("DFS_CER_DOCS_REGENERATE") == "1"
#: runs Python blocks one after another in one namespace: a request is a JSON line on stdin,
#: the reply (what the block printed, and its error) a JSON line on a pipe of its own
WORKER = r"""
import contextlib, io, json, os, sys, traceback
reply = os.fdopen(int(sys.argv[1]), "w")
namespace = {"__name__": "__main__"}
for request in sys.stdin:
    code, name = json.loads(request)
    out, error = io.StringIO(), None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, name, "exec"), namespace)
    except BaseException:
        error = traceback.format_exc()
    reply.write(json.dumps([out.getvalue(), error]) + "\n")
    reply.flush()
"""


def runnable(block: Block) -> bool:
    return block.not_run is None and (block.console or block.python)


#: the site's pages, and the README (the site's front page in short)
FILES = {p.name: p for p in [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]}
PAGES = [name for name, p in FILES.items() if any(map(runnable, blocks(p.read_text())))]


class Python:
    """A Python process a page's Python blocks run in, in order."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        read, write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(write)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            text=True,
            pass_fds=(write,),
        )
        os.close(write)
        self.replies = os.fdopen(read)

    def run(self, code: str, name: str) -> tuple[str, str | None]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps([code, name]) + "\n")
        self.process.stdin.flush()
        line = self.replies.readline()
        assert line, f"{name}: the Python process ended"
        out, error = json.loads(line)
        return out, error

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.replies.close()


def _shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )


def _console(block: Block, page: str, cwd: Path, env: dict[str, str]) -> str | None:
    """Runs a console block; returns its body with real outputs where they differ (None: as
    shown)."""
    status = 0
    rewritten: list[str] = []
    changed = False
    for command, shown in steps(block.body):
        rewritten.append("$ " + command)
        if command.strip() == "echo $?":  # the previous command's exit status
            if REGENERATE and normal(shown) != [str(status)]:
                shown, changed = [str(status)], True
            assert normal(shown) == [str(status)], (page, block.line, command)
            rewritten.extend(shown)
            continue
        name = command.split()
        if len(name) == 2 and name[0] == "cat" and not (cwd / name[1]).exists():
            (cwd / name[1]).write_text("".join(line + "\n" for line in shown))
        done = _shell(command, cwd, env)
        status = done.returncode
        refused = bool(shown) and shown[0].startswith("error: ")  # a shown error
        assert REGENERATE or (status != 0) == refused, (
            page,
            block.line,
            command,
            done.stdout[-3000:],
        )
        actual = done.stdout.splitlines()
        if (shown or REGENERATE) and not shows(actual, shown):
            assert REGENERATE, (
                f"{page}:{block.line}: {command}\nshown:\n"
                + "\n".join(shown)
                + "\nprinted:\n"
                + done.stdout
            )
            changed = True
            rewritten.extend(masked(line.rstrip().replace(str(cwd), HOME)) for line in actual)
        else:
            rewritten.extend(shown)
    return "".join(line + "\n" for line in rewritten) if changed else None


@pytest.mark.flight
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", PAGES)
def test_a_page_s_examples_print_what_it_shows(page: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(DOCS.parent),
        "DFS_CER_SOURCE": str(DOCS.parent),  # the source tree, where a reader runs spark_jobs/
        "COLUMNS": "120",
    }
    text = FILES[page].read_text()
    python: Python | None = None
    replace: list[tuple[Block, str]] = []
    try:
        for block in blocks(text):
            for setup in block.setups:
                done = _shell(setup, tmp_path, env)
                assert done.returncode == 0, (page, setup, done.stdout[-3000:])
            if not runnable(block):
                continue
            if block.console:
                body = _console(block, page, tmp_path, env)
                if body is not None:
                    replace.append((block, body))
                continue
            python = python or Python(tmp_path, env)
            out, error = python.run(block.body, f"{page}:{block.line}")
            assert error is None, f"{page}:{block.line}:\n{error}"
            shown = block.output
            if shown is not None and not shows(out.splitlines(), shown.body.splitlines()):
                assert REGENERATE, f"{page}:{block.line}: shown:\n{shown.body}\nprinted:\n{out}"
                replace.append((shown, out.replace(str(tmp_path), HOME)))
    finally:
        if python is not None:
            python.close()
        # nodes a block started stop with the test
        _shell("dfs-cer storage-node down", tmp_path, env)
    for block, body in sorted(replace, key=lambda r: -r[0].start):
        text = text[: block.start] + body + text[block.start + len(block.body) :]
    if replace:
        FILES[page].write_text(text)


def test_every_example_runs_or_says_why_not() -> None:
    """A fenced block is a doctest session, a console or Python example, an example's output,
    or marked ``<!-- not run: why -->``; a plain block of another kind is ```` ```text ````."""
    for page in sorted(DOCS.glob("*.md")):
        for block in blocks(page.read_text()):
            if block.not_run is not None or block.body.startswith(">>> "):
                continue
            assert block.console or block.python or block.language in ("text", "sql", "toml"), (
                f"{page.name}:{block.line}: a block neither run nor marked <!-- not run: why -->"
            )


def test_the_getting_started_page_and_the_readme_are_run() -> None:
    assert "getting-started.md" in PAGES and "README.md" in PAGES
