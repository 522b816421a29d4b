"""One durability pass for many freshly written files: ``syncfs(2)`` on their file system.

Why: a cold preparation writes thousands of small files; an ``fsync`` per file and per folder
costs a journal commit each and dominated preparation time. ``syncfs`` writes back and waits
for every dirty page and inode of one file system in a single call, so a whole snapshot
(or a batch of renames) becomes durable at the cost of one commit. Where ``syncfs`` is not
available (not Linux, no libc symbol), the precise per-entry ``fsync`` walk is used instead:
the guarantee never weakens, only the cost changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from runtime.files import fsync_directory, fsync_tree


@cache
def _syncfs() -> object | None:
    if not hasattr(os, "O_DIRECTORY"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        function = libc.syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def syncfs_available() -> bool:
    return _syncfs() is not None


def _call_syncfs(path: Path) -> bool:
    function = _syncfs()
    if function is None:
        return False
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if function(fd) != 0:  # type: ignore[operator]
            error = ctypes.get_errno()
            raise OSError(error, f"syncfs({path}) failed: {os.strerror(error)}")
    finally:
        os.close(fd)
    return True


def make_trees_durable(roots: Sequence[Path], filesystem: Path) -> None:
    """Every file and folder below each of ``roots`` (written without fsync, all on the file
    system holding ``filesystem``) is on disk on return."""
    if not _call_syncfs(filesystem):
        for root in roots:
            fsync_tree(root, files=True)


def make_entries_durable(directory: Path) -> None:
    """Entries created or renamed inside ``directory`` are on disk on return."""
    if not _call_syncfs(directory):
        fsync_directory(directory)
