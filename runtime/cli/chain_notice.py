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
    """Print ``assetcast: warning: run X: hash chain broken: ...`` if it is; True if so."""
    try:
        report = store.verify_chain(run_id)
    except UnknownRun:
        return False
    if report.ok:
        return False
    sys.stderr.write(f"{PROG}: warning: {one_line(Exception(report.summary()))}\n")
    sys.stderr.flush()
    return True
