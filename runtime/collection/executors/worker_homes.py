"""Ray workers' own working folders, and the removal of those whose worker is gone.

Every actor works in a fresh folder of its own (deployments materialized there), on
whatever machine it runs. A worker that is SIGKILLed or whose node dies cannot remove it,
so every folder lives under one root per machine (``<tmp>/assetcast-ray-workers``) and its
worker holds an exclusive ``flock`` on a file inside it for its whole life. The kernel
drops that lock when the process dies however it dies, so "lock free" means "owner gone":
each new worker first removes the folders it finds unlocked, and the driver removes its own
session's folders on its machine once the session is over. A live worker's folder, of this
session or another one, is never touched.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

ROOT_NAME = "assetcast-ray-workers"
LOCK_NAME = ".owner.lock"
# A folder is created, then its lock taken, microseconds apart; an unlocked folder younger
# than this may be one being born, so it is left for a later sweep.
GRACE_S = 10.0


def homes_root() -> Path:
    return Path(tempfile.gettempdir()) / ROOT_NAME


class WorkerHome:
    """A worker's folder, locked while this object (its process) lives."""

    def __init__(self, session_tag: str, name: str, root: Path | None = None) -> None:
        self.root = root if root is not None else homes_root()
        self.root.mkdir(parents=True, exist_ok=True)
        removed = remove_abandoned(self.root)
        if removed:
            log.info("ray_worker_homes_removed", count=len(removed), root=str(self.root))
        self.path = Path(tempfile.mkdtemp(prefix=f"{session_tag}-{name}-", dir=self.root))
        self._lock_fd: int | None = os.open(self.path / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)

    def remove(self) -> None:
        """Remove the folder and drop the lock (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)


def _abandoned(home: Path) -> bool:
    """Whether no live process holds ``home``'s lock (a folder without a lock file is one
    whose worker died between creating it and locking it)."""
    try:
        if time.time() - home.stat().st_mtime < GRACE_S:
            return False
    except OSError:
        return False
    try:
        fd = os.open(home / LOCK_NAME, os.O_RDWR)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops a lock we may just have taken
    return True


def remove_abandoned(root: Path | None = None) -> list[Path]:
    """Remove every folder under ``root`` whose worker is gone; the folders removed."""
    root = root if root is not None else homes_root()
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return removed
    for home in entries:
        if home.is_dir() and _abandoned(home):
            shutil.rmtree(home, ignore_errors=True)
            removed.append(home)
    return removed


def remove_session_homes(session_tag: str, root: Path | None = None) -> list[Path]:
    """Remove this machine's folders of one executor session (its workers are gone)."""
    root = root if root is not None else homes_root()
    removed: list[Path] = []
    try:
        entries = list(root.glob(f"{session_tag}-*"))
    except FileNotFoundError:
        return removed
    for home in entries:
        if home.is_dir():
            shutil.rmtree(home, ignore_errors=True)
            removed.append(home)
    return removed
