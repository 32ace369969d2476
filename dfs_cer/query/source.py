"""The user's SQL text: positions, tokens and the span rewrites the parser needs.

sqlglot's tokenizer gives every token its character span; the parser works on token ranges of
this text and hands sqlglot re-assembled fragments whose offsets map back to the original, so
every error can point at the user's line and column.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, Tokenizer, TokenType

from dfs_cer.errors import QuerySyntaxError, SourcePosition


@dataclass
class SourceText:
    sql: str
    tokens: list[Token] = field(init=False)
    _line_starts: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self._line_starts = [0] + [i + 1 for i, c in enumerate(self.sql) if c == "\n"]
        try:
            self.tokens = Tokenizer().tokenize(self.sql)
        except TokenError as exc:
            raise QuerySyntaxError(
                f"cannot tokenize the query: {exc}", hint="check quotes and comments", code="syntax"
            ) from exc

    def position(self, offset: int) -> SourcePosition:
        offset = max(0, min(offset, len(self.sql)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return SourcePosition(line + 1, offset - self._line_starts[line] + 1)

    def token_position(self, index: int) -> SourcePosition:
        if index >= len(self.tokens):
            return self.position(len(self.sql))
        return self.position(self.tokens[index].start)

    def text(self, first: int, last: int) -> str:
        """Source text from token ``first`` to token ``last`` inclusive."""
        return self.sql[self.tokens[first].start : self.tokens[last].end + 1]

    def matching_paren(self, index: int) -> int:
        """Index of the R_PAREN closing the L_PAREN at ``index``."""
        depth = 0
        for i in range(index, len(self.tokens)):
            kind = self.tokens[i].token_type
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    return i
        raise QuerySyntaxError(
            "unbalanced parentheses: '(' is never closed",
            position=self.token_position(index),
            code="syntax",
        )


@dataclass
class Fragment:
    """Text handed to sqlglot with a map from its offsets back to the source."""

    text: str
    anchors: list[tuple[int, int]]  # (offset in text, offset in source), ascending

    def source_offset(self, offset: int) -> int:
        keys = [a[0] for a in self.anchors]
        i = max(0, bisect.bisect_right(keys, offset) - 1)
        new, old = self.anchors[i]
        return old + (offset - new)


class FragmentBuilder:
    def __init__(self, source: SourceText) -> None:
        self.source = source
        self.parts: list[str] = []
        self.anchors: list[tuple[int, int]] = []
        self.length = 0

    def synthetic(self, text: str, source_offset: int) -> None:
        self.anchors.append((self.length, source_offset))
        self.parts.append(text)
        self.length += len(text)

    def copy(self, start: int, end: int) -> None:
        """Copy source characters ``[start, end)``."""
        if end <= start:
            return
        self.anchors.append((self.length, start))
        self.parts.append(self.source.sql[start:end])
        self.length += end - start

    def build(self) -> Fragment:
        return Fragment("".join(self.parts), self.anchors or [(0, 0)])
