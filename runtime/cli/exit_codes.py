"""What scripts may rely on: the program name in messages, the exit codes, and the error
that means "bad command line" (exit 2, one line on stderr)."""

from __future__ import annotations

from domain.errors import AssetcastError, AssetcastInputError

PROG = "assetcast"
EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(AssetcastInputError):
    """A command line that argparse (or a command's own checks) refused."""


class UnreadableRuns(AssetcastError):
    """A report over every run was printed without the runs whose log cannot be decoded.

    Exit 1 (the store holds something wrong, though nothing the user typed was bad), with
    one stderr line per broken run naming it, the first bad event's seq and the reason.
    """

    def __init__(self, unreadable: list[dict]) -> None:
        self.lines = [f"left out of the report: {u['reason']}" for u in unreadable]
        super().__init__("; ".join(self.lines))
