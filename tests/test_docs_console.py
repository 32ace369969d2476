"""The documentation's command-line examples marked ``<!-- run ... -->`` run, in a new
directory, block by block, as a reader types them: every command succeeds (or fails, where the
page shows its error) and prints the output the page shows (ports, process-specific paths and
spacing aside)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"^<!-- run\b.*?-->\n```[a-z]*\n(.*?)^```", re.M | re.S)
#: what differs from run to run, written the same way on both sides
VOLATILE = [
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"'/[^']*?/\.dfs-cer/"), "'DIR/.dfs-cer/"),
    (re.compile(r"'/[^']*?/\.dfs-cer'"), "'DIR/.dfs-cer'"),
]


def steps(block: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) for each ``$ `` line of a block; a command
    goes on while its double quotes are open."""
    out: list[tuple[str, list[str]]] = []
    command: str | None = None
    for line in block.splitlines():
        if command is not None and command.count('"') % 2:
            command += "\n" + line
            out[-1] = (command, [])
        elif line.startswith("$ "):
            command = line[2:]
            out.append((command, []))
        elif out:
            out[-1][1].append(line)
    return out


def normal(lines: list[str]) -> list[str]:
    text = [line.strip() for line in lines if line.strip()]
    for pattern, repl in VOLATILE:
        text = [pattern.sub(repl, line) for line in text]
    return text


PAGES = [p.name for p in sorted(DOCS.glob("*.md")) if BLOCK.search(p.read_text())]


@pytest.mark.flight
@pytest.mark.parametrize("page", PAGES)
def test_a_page_s_console_examples_print_what_it_shows(page: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    try:
        for block in BLOCK.findall((DOCS / page).read_text()):
            status = 0
            for command, shown in steps(block):
                if command.strip() == "echo $?":  # the previous command's exit status
                    assert normal(shown) == [str(status)], command
                    continue
                done = subprocess.run(
                    ["bash", "-c", command],
                    cwd=tmp_path,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=300,
                )
                status = done.returncode
                refused = bool(shown) and shown[0].startswith("error: ")  # a shown error
                assert (status != 0) == refused, (command, done.stdout[-2000:])
                if shown:
                    assert normal(done.stdout.splitlines()) == normal(shown), command
    finally:  # nodes a block started stop with the test
        subprocess.run(["bash", "-c", "dfs-cer storage-node down"], cwd=tmp_path, env=env,
                       capture_output=True, timeout=60)  # fmt: skip


def test_the_getting_started_page_is_run() -> None:
    assert "getting-started.md" in PAGES
