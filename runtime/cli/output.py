"""Command output: stdout is for results only (logs go to stderr), so scripts can pipe it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any


def out(text: str = "") -> None:
    """Command output: stdout, newline-terminated (the CLI's only writer to stdout)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain left-aligned text table (empty string cells for None)."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
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
    return text
