"""The one line every reading command prints first when a run's hash chain is broken.

Why on stderr: stdout stays byte-identical to the reports it prints (``show --json``), and
the warning still comes before anything else the command says.
"""

from __future__ import annotations

import sys
from typing import Any

from domain.errors import UnknownRun
from runtime.cli.exit_codes import PROG
from runtime.cli.output import one_line


def warn_if_chain_broken(store: Any, run_id: str) -> bool:
    """Print ``assetcast: warning: run X: hash chain broken: ...`` if it is; True if so.

    The cheap check (``store.check_chain``: the events after the run's verified anchor),
    so a reading command costs the same on day 100 as on day 1; ``verify`` walks it all."""
    try:
        report = store.check_chain(run_id)
    except UnknownRun:
        return False
    return warn_about(report)


def warn_about(report: Any) -> bool:
    """The warning line for a chain report that is not ok; True if it was printed."""
    if report.ok:
        return False
    sys.stderr.write(f"{PROG}: warning: {one_line(Exception(report.summary()))}\n")
    sys.stderr.flush()
    return True
