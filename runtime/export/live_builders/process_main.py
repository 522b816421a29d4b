"""Entry point of the dataset builder process: ``python .../process_main.py FD PARENT_PID``.

Run by path (not ``-m``), so a ``runtime`` or ``store`` folder in the working directory can
never shadow the project's packages; the project root goes first on ``sys.path``.

Before anything is imported the process ignores SIGINT (Ctrl-C reaches the whole process
group; the parent decides) and, on Linux, asks the kernel to SIGKILL it when its parent
dies, so a killed collector takes its build with it exactly as it would a build thread:
nothing is published after the collector is gone, even while this process is still
importing or deep inside a build. (The kernel sends that signal when the *thread* that
spawned the process ends; the thread that opens a session's live datasets is the one that
closes them, so it outlives this process.) Elsewhere the pipe closing and ``getppid`` tell.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> bool:
    """Arrange to be killed with the parent; False if it is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    return os.getppid() == parent_pid


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent_pid = int(sys.argv[2])
    if not _die_with_parent(parent_pid):
        return 0
    sys.path[0] = str(Path(__file__).resolve().parents[3])
    from multiprocessing.connection import Connection

    from runtime.export.live_builders.process import serve

    serve(Connection(int(sys.argv[1])), parent_pid)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
