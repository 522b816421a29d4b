"""Durable file writes shared by every writer of reports and trajectories.

A crash must never leave a half-written report or trajectory under its final
name, so everything goes through a temp file, fsync, rename and a directory fsync.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def report_text(payload: Any) -> str:
    """The exact text of a JSON report; `show --json` reproduces it byte for byte."""
    return json.dumps(payload, sort_keys=True, indent=2, allow_nan=False) + "\n"


_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, streamed: trajectories and meshes may be large."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` holds either the old or the whole new content."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_json_atomic(path: Path, payload: Any) -> None:
    write_bytes_atomic(Path(path), report_text(payload).encode("utf-8"))
