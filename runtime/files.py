"""Durable file writes shared by every writer of reports and trajectories.

A crash must never leave a half-written report or trajectory under its final
name, so everything goes through a temp file, fsync, rename and a directory fsync.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import structlog

from runtime.json_text import indented_json

if TYPE_CHECKING:  # a type only: importing domain.assets costs every command start-up
    from domain.assets import PublishFence as Fence


def __getattr__(name: str) -> Any:
    """``Fence`` (re-exported for the writers that import it from here), loaded on use."""
    if name == "Fence":
        from domain.assets import PublishFence

        return PublishFence
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


log = structlog.get_logger(__name__)

# ``<session_id>.<token>-`` inside a temporary file or folder name: whose it is.
_TEMP_OWNER = re.compile(r"(?P<session>[0-9a-f]{12})\.(?P<token>[0-9]+)-")


def report_text(payload: Any) -> str:
    """The exact text of a JSON report; `show --json` reproduces it byte for byte
    (``json.dumps(sort_keys=True, indent=2, allow_nan=False)``, faster)."""
    return indented_json(payload) + "\n"


_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, streamed: trajectories and meshes may be large."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by its path (for files written elsewhere, e.g. by a
    library that does not hand back its file descriptor)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    fsync_path(directory)


def write_files_fsynced(root: Path, files: Iterable[tuple[str, bytes]]) -> None:
    """Write each ``(relative path, bytes)`` under ``root``, every file fsynced: the staging
    step of a folder that is then renamed into place whole (the caller fsyncs folders)."""
    for rel, data in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())


def fsync_tree(root: Path, *, files: bool = True) -> None:
    """Flush a freshly written tree before a rename publishes it.

    Bottom-up, because an entry is only durable once the folder holding it is synced.
    ``files=False`` when every file was already fsynced as it was written.
    """
    for directory, _dirnames, filenames in os.walk(root, topdown=False):
        if files:
            for name in filenames:
                fd = os.open(Path(directory) / name, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        fsync_directory(Path(directory))


def temp_name(stem: str, fence: Fence | None) -> str:
    """A temporary name carrying its writer's ``<session_id>.<token>`` (when fenced)."""
    return f"{stem}{fence.tag}-" if fence is not None else stem


def temp_owner(name: str) -> str | None:
    """The session id a temporary name carries, or None (an unowned or foreign name)."""
    found = _TEMP_OWNER.search(name)
    return found["session"] if found else None


def remove_dead_temps(paths: Iterable[Path], is_dead: Callable[[str], bool]) -> list[Path]:
    """Delete the temporary files/folders whose owning session is provably dead.

    Never another live session's: a writer that stalled past its lease may still be filling
    its folder, and deleting under it could let a partial folder be published. What cannot be
    proven dead is kept and logged.
    """
    removed = []
    for path in paths:
        owner = temp_owner(path.name)
        if owner is None or not is_dead(owner):
            log.info("temp_kept", path=str(path), owner=owner, reason="owner may be alive")
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        log.info("temp_removed", path=str(path), owner=owner)
        removed.append(path)
    return removed


def write_bytes_atomic(path: Path, data: bytes, *, fence: Fence | None = None) -> None:
    """Write ``data`` so that ``path`` holds either the old or the whole new content.

    With ``fence``, its check runs right before the rename that publishes the file, so a
    session that lost its lease leaves nothing under ``path``. A new file (a trajectory) is
    checked once more after the rename and taken back if the lease was lost in between, so
    even a process frozen between the check and the rename leaves nothing behind.
    """
    write_stream_atomic(path, lambda handle: handle.write(data), fence=fence)


def write_stream_atomic(
    path: Path, produce: Callable[[BinaryIO], object], *, fence: Fence | None = None
) -> None:
    """:func:`write_bytes_atomic` for content that ``produce`` writes to the open temporary
    file in pieces (a report as long as the history, never held whole); if ``produce``
    raises, nothing is published and ``path`` keeps its old content."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(
        prefix=temp_name(f".{path.name}.", fence), suffix=".tmp", dir=path.parent
    )
    new_file = not path.exists()
    try:
        with os.fdopen(fd, "wb") as handle:
            produce(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if fence is not None:
            fence.check()
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)
    if fence is not None and new_file:
        try:
            fence.check()
        except BaseException:
            path.unlink(missing_ok=True)
            fsync_directory(path.parent)
            raise


def write_json_atomic(path: Path, payload: Any, *, fence: Fence | None = None) -> None:
    write_bytes_atomic(Path(path), report_text(payload).encode("utf-8"), fence=fence)
