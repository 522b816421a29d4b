"""One bounded reader for every file read from user input.

A FIFO named ``asset.catalog.json`` blocks ``open`` forever, a character device such as
``/dev/zero`` never ends, and a 10 GB file exhausts memory. So a file is opened only after
``stat`` says it is a regular file of acceptable size, it is opened with ``O_NONBLOCK`` (a FIFO
swapped in after the check cannot block the open), its type and size are checked again on the
open descriptor (which is what is actually read), and at most ``limit + 1`` bytes are read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from domain.errors import AssetcastInputError
from domain.paths import ErrorFactory
from runtime.inputs.paths import FILE_FLAGS, open_inside

_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO", "a character device", ...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _check(info: os.stat_result, label: str, what: str, limit: int, error: ErrorFactory) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{label}: {what} is {kind_of(info.st_mode)}, not a regular file")
    if info.st_size > limit:
        raise error(f"{label}: {what} is larger than {limit} bytes")


def _read_descriptor(
    fd: int, label: str, what: str, limit: int, error: ErrorFactory
) -> bytes:
    try:
        _check(os.fstat(fd), label, what, limit, error)
        os.set_blocking(fd, True)  # a regular file: plain blocking reads from here on
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise error(f"{label}: cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if total > limit:  # grew after the size check
        raise error(f"{label}: {what} is larger than {limit} bytes")
    return b"".join(chunks)


def read_bounded(
    path: str | Path,
    *,
    limit: int,
    what: str = "file",
    follow_symlinks: bool = False,
    error: ErrorFactory = AssetcastInputError,
) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); anything else is refused
    with one line naming the file. ``follow_symlinks`` only for a path the user typed."""
    label = str(path)
    try:
        info = os.stat(path) if follow_symlinks else os.lstat(path)
    except FileNotFoundError:
        raise error(f"{label}: {what} not found") from None
    except OSError as exc:
        raise error(f"{label}: cannot read {what}: {exc.strerror}") from None
    _check(info, label, what, limit, error)
    flags = FILE_FLAGS if not follow_symlinks else FILE_FLAGS & ~os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        reason = "is a symbolic link (not allowed)" if exc.errno == errno.ELOOP else exc.strerror
        raise error(f"{label}: {what} {reason}") from None
    return _read_descriptor(fd, label, what, limit, error)


def read_inside(
    base: str | Path,
    ref: str,
    *,
    limit: int,
    what: str = "file",
    error: ErrorFactory = AssetcastInputError,
) -> bytes:
    """The bytes of ``base / ref``: contained (no escape, no symlink on any component),
    regular, at most ``limit`` bytes."""
    label = str(Path(base) / ref)
    fd = open_inside(base, ref, where=label, error=error)
    return _read_descriptor(fd, label, what, limit, error)
