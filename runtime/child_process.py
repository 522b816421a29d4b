"""A helper interpreter of this package, spoken to over a socket pair.

Why one piece: the camera render server and the live-dataset builder both run work in a
fresh interpreter started with ``subprocess`` (never fork: a process forked after an OpenGL
context exists hangs, and a fresh one inherits nothing else either), reach it through one end
of a socket pair passed by descriptor, and must turn a dead child into one clear error naming
what died and its exit code, wherever the pipe breaks.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

_REPO = str(Path(__file__).resolve().parents[1])


class ChildProcess:
    """``python SCRIPT FD ARGS...`` with this repository importable; ``send``/``recv`` pickled
    messages (``multiprocessing`` framing); a broken pipe raises ``died`` naming ``what``."""

    def __init__(
        self, script: Path, *args: str, what: str, died: type[Exception],
        quiet: bool = False,
    ) -> None:
        self.what, self.died = what, died
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO, env.get("PYTHONPATH")) if p)
        try:
            self.process = subprocess.Popen(
                [sys.executable, str(script), str(theirs.fileno()), *args],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL if quiet else None, env=env,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.connection = Connection(ours.detach())

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: tuple[Any, ...]) -> None:
        try:
            self.connection.send(message)
        except (OSError, ValueError) as error:  # BrokenPipeError; ValueError: pipe closed
            raise self.died(self.exit_message()) from error

    def recv(self) -> Any:
        try:
            return self.connection.recv()
        except (EOFError, OSError) as error:
            raise self.died(self.exit_message()) from error

    def exit_message(self) -> str:
        try:
            code = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        return f"the {self.what} process exited (exit code {code})"

    def close(self, timeout_s: float) -> None:
        """Wait ``timeout_s`` for the child to end (the caller asked it to), else kill it;
        reap it and close the pipe."""
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.connection.close()
