"""The documentation's Python examples run, and print what the pages show: every fenced block
of ``docs/*.md`` written as an interactive session (``>>>``) is a doctest; the sessions of a
page run in order, in one namespace, as a reader types them."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```[a-z]*\n(>>> .*?)^```", re.M | re.S)


def sessions(page: Path) -> list[tuple[int, str]]:
    text = page.read_text()
    return [(text[: m.start()].count("\n") + 2, m.group(1)) for m in FENCE.finditer(text)]


PAGES = [p.name for p in sorted(DOCS.glob("*.md")) if sessions(p)]


@pytest.mark.parametrize("page", PAGES)
def test_a_page_s_sessions_print_what_it_shows(page: str) -> None:
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    namespace: dict[str, object] = {}
    for line, block in sessions(DOCS / page):
        test = parser.get_doctest(block, namespace, f"{page}:{line}", str(DOCS / page), line)
        test.globs = namespace  # later sessions see what earlier ones defined
        runner.run(test, clear_globs=False)
    assert runner.summarize(verbose=False).failed == 0, f"{page}: see the failures above"


def test_the_pages_hold_sessions() -> None:
    assert len(PAGES) >= 2
