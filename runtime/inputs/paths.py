"""The filesystem half of the one path-containment rule (the lexical half is
``domain.paths.contained_relpath``).

A relative path that looks contained can still leave its base through a symlink on any of
its components, so the components are checked one by one with ``lstat`` (``resolve_inside``)
or, where a file is about to be read, opened one by one relative to the previous folder with
``O_NOFOLLOW`` (``open_inside``): a symlink swapped in between a check and the read cannot
redirect it. Nothing here ever follows a link inside the base.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from domain.errors import AssetcastInputError
from domain.paths import ErrorFactory, contained_relpath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def resolve_inside(
    base: str | Path,
    ref: str,
    *,
    where: str,
    error: ErrorFactory = AssetcastInputError,
) -> Path:
    """``base / ref`` after proving it stays inside ``base``: lexically contained, every
    component exists and none is a symlink. ``base`` itself may be reached through links."""
    root = Path(base).resolve()
    rel = contained_relpath(ref, where=where, error=error)
    current = root
    for part in rel.split("/"):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            raise error(f"{where}: {current} does not exist") from None
        except OSError as exc:
            raise error(f"{where}: {current}: {exc.strerror}") from None
        if stat.S_ISLNK(info.st_mode):
            raise error(f"{where}: {current} is a symbolic link (not allowed)")
    return current


def open_inside(
    base: str | Path,
    ref: str,
    *,
    where: str,
    error: ErrorFactory = AssetcastInputError,
) -> int:
    """A read-only, non-blocking descriptor of ``base / ref`` opened component by component
    without following any symlink below ``base``. The caller closes it (and checks its type)."""
    rel = contained_relpath(ref, where=where, error=error)
    parts = rel.split("/")
    try:
        folder = os.open(Path(base).resolve(), _DIR_FLAGS)
    except OSError as exc:
        raise error(f"{where}: {base}: {exc.strerror}") from None
    try:
        current = Path(base)
        for part in parts[:-1]:
            current = current / part
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=folder)
            except OSError as exc:
                raise error(f"{where}: {current}: {_open_reason(exc, 'folder')}") from None
            os.close(folder)
            folder = child
        try:
            return os.open(parts[-1], FILE_FLAGS, dir_fd=folder)
        except OSError as exc:
            raise error(f"{where}: file {_open_reason(exc, 'file')}") from None
    finally:
        os.close(folder)


def _open_reason(exc: OSError, what: str) -> str:
    if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link (EMLINK on BSD)
        return "is a symbolic link (not allowed)"
    if exc.errno == errno.ENOTDIR:
        return f"is not a {what} (or a symbolic link)"
    if isinstance(exc, FileNotFoundError):
        return "does not exist"
    return exc.strerror or str(exc)
