"""SHA-256 of dataset files without re-reading unchanged ones (a per-process memo).

A live dataset is re-published after every batch; reusing the previous version means knowing
its files' digests, and hashing gigabytes of video on every update would cost more than the
update. A digest is remembered with the file's inode, size and modification time (what was
hashed or written); while all three are unchanged the file is the one that was hashed (an
edit in place changes the modification time), otherwise it is hashed again.
"""

from __future__ import annotations

import os
from pathlib import Path

from domain.canonical import sha256_json
from runtime.files import file_sha256

_LIMIT = 200_000
_known: dict[str, tuple[tuple[int, int, int], str]] = {}


def _identity(path: Path) -> tuple[int, int, int]:
    status = os.stat(path)
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def remember(path: Path, digest: str) -> None:
    """``path`` (closed, not to be written again) has SHA-256 ``digest``."""
    if len(_known) >= _LIMIT:
        _known.clear()
    _known[str(path)] = (_identity(path), digest)


def known_sha256(path: Path) -> str:
    """The file's SHA-256, hashed only if it is not the file remembered under this path."""
    found = _known.get(str(path))
    identity = _identity(path)
    if found is not None and found[0] == identity:
        return found[1]
    digest = file_sha256(path)
    remember(path, digest)
    return digest


def dataset_digest(files: dict[str, str]) -> str:
    """A dataset version's digest: SHA-256 of the canonical JSON of every file's relative path
    and SHA-256 (what `DatasetUpdated` records; a LeRobot version's folder is named by it)."""
    return sha256_json(files)
