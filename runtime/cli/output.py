"""Command output: stdout is for results only (logs go to stderr), so scripts can pipe it.

Everything printed may hold names read from a database or a folder (a run's task id, an
asset id, a catalog folder name, an error detail). A newline in one would forge a table row,
an ESC sequence would repaint the terminal. So ``escape`` is applied to all human output
here, in one place: ``out`` prints one line with every control character escaped (newlines
included), ``out_block`` prints several lines escaping each, ``table`` escapes every cell,
and ``one_line`` (stderr) escapes too.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Sequence
from typing import Any

_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1, line/paragraph separators, bidi
    overrides) written as a visible escape such as ``\\x1b`` or ``\\n``."""
    if text.isprintable():
        return text
    return "".join(
        _escaped(char)
        if char in _BIDI or unicodedata.category(char) in ("Cc", "Zl", "Zp")
        else char
        for char in text
    )


def out(text: str = "") -> None:
    """One line of command output on stdout (the CLI's only writer to stdout); any control
    character in it, a newline included, is escaped."""
    sys.stdout.write(escape(text.removesuffix("\n")) + "\n")
    sys.stdout.flush()


def out_block(text: str) -> None:
    """Several lines of output (a table, a traceback, JSON); each line is escaped."""
    for line in text.removesuffix("\n").split("\n"):
        sys.stdout.write(escape(line) + "\n")
    sys.stdout.flush()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain left-aligned text table (empty string cells for None), every cell escaped."""
    cells = [[escape("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


def one_line(error: BaseException) -> str:
    """An error's message on one line: stderr messages are a single line by contract."""
    text = " ".join(str(error).split()) or type(error).__name__
    return escape(text)
