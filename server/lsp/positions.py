"""The one converter between the evaluator's positions (1-based lines and columns, in characters) and LSP ranges
(0-based lines, characters in the client's position encoding, UTF-16 by default)."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec


class Positions:
    """Positions in one text. Lines and columns outside the text are clamped, never an error."""

    def __init__(self, text: str, codec: PositionCodec | None = None):
        self.lines: Sequence[str] = text.splitlines() or [""]
        self.raw_lines = text.splitlines(keepends=True)
        self.ends_with_newline = text.endswith(("\n", "\r"))
        self.codec = codec or PositionCodec()

    def _position(self, line0: int, char: int) -> types.Position:
        line0 = min(max(line0, 0), len(self.lines) - 1)
        text = self.lines[line0]
        char = min(max(char, 0), len(text))
        return types.Position(line=line0, character=self.codec.client_num_units(text[:char]))

    def line_range(self, line: int, column: int = 1, end_line: int | None = None) -> types.Range:
        """The range of an evaluator position: from (line, column) to the end of `end_line` (default `line`).
        Column 1 means the whole line, so it starts at the line's first non-blank character."""
        line0 = min(max(line - 1, 0), len(self.lines) - 1)
        text = self.lines[line0]
        indent = len(text) - len(text.lstrip())
        start = indent if column <= 1 else min(column - 1, len(text))
        end0 = min(max((end_line or line) - 1, line0), len(self.lines) - 1)
        end_char = len(self.lines[end0].rstrip())
        if end0 == line0 and end_char <= start:
            end_char = len(text)
        return types.Range(start=self._position(line0, start), end=self._position(end0, end_char))

    def span(self, line: int, column: int, end_line: int, end_column: int) -> types.Range:
        """An AST span (1-based lines, 0-based character columns) as a range."""
        return types.Range(start=self._position(line - 1, column), end=self._position(end_line - 1, end_column))

    def end_of_line(self, line: int) -> types.Position:
        """After the last non-blank character of 1-based `line` (where an inlay hint goes)."""
        line0 = min(max(line - 1, 0), len(self.lines) - 1)
        return self._position(line0, len(self.lines[line0].rstrip()))

    def to_line(self, position: types.Position) -> int:
        """The 1-based line of a client position."""
        return min(max(position.line, 0), len(self.lines) - 1) + 1

    def line_block(self, first0: int, end0: int) -> types.Range:
        """0-based lines first0..end0-1 as a range from the start of `first0` to the start of `end0`: what a
        line-based edit replaces (`end0` may be one past the last line)."""
        count = len(self.raw_lines)
        start = self._boundary(min(first0, count))
        return types.Range(start=start, end=self._boundary(min(end0, count)))

    def _boundary(self, line0: int) -> types.Position:
        if line0 < len(self.raw_lines) or self.ends_with_newline or not self.raw_lines:
            return types.Position(line=line0, character=0)
        last = self.raw_lines[-1]
        return types.Position(line=line0 - 1, character=self.codec.client_num_units(last))
