"""What scripts may rely on: the program name in messages, the exit codes, and the error
that means "bad command line" (exit 2, one line on stderr)."""

from __future__ import annotations

from domain.errors import AssetcastInputError

PROG = "assetcast"
EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(AssetcastInputError):
    """A command line that argparse (or a command's own checks) refused."""
