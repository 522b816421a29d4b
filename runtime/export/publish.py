"""Atomic dataset versions: a reader sees the previous complete version or the new one.

A LeRobot dataset is a directory, so ``DIR`` is a symbolic link to a complete version
directory ``.<name>.assetcast/<digest>`` beside it. A new version is written into a temporary
directory there (files it shares with the previous version are hard links, nothing to write),
renamed to its digest, and made durable in one pass: every new file (each one's sync starts
as soon as it is written, and the rename does not wait for them), every folder of the version
and the folder holding the rename are fsynced at once, from a small thread pool, so the file
system commits them together (one journal commit instead of one per entry; unlike
``syncfs`` it never waits for other processes' dirty data). Only then is it published by
atomically replacing the link (``rename`` of a new link over the old one, then one fsync of the
parent): two rounds of syncing per version, however many files it has. Until the link
switches, nobody looks at the renamed folder, and a folder under a digest name that is not the
link's target is never trusted (a later writer of the same digest replaces it). The previous
version is kept, so a reader that resolved the link just before the switch still reads a whole
dataset; older ones are removed.

A robomimic dataset is one HDF5 file, so it is written to a temporary file beside the target,
fsynced and renamed over it (a reader holding the old file open keeps reading the old inode).

Writers of the same target are serialized with an advisory lock on the parent directory.
Refusals (the path holds something that is not ours) happen before anything is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from runtime.export.errors import NotADataset
from runtime.files import fsync_directory, fsync_path

VERSIONS_SUFFIX = ".assetcast"
TEMP_PREFIX = "tmp-"


_SYNC_THREADS = 16
_MAX_OPEN_SYNCS = 64  # files opened for a background sync and not yet synced, at most


_POOLS: dict[tuple[str, int], ThreadPoolExecutor] = {}


def worker_pool(name: str, size: int) -> ThreadPoolExecutor:
    """A thread pool shared by every export in this process (one per process: a forked
    child never inherits its parent's threads, so it gets pools of its own)."""
    key = (name, os.getpid())
    pool = _POOLS.get(key)
    if pool is None:
        pool = _POOLS[key] = ThreadPoolExecutor(size, thread_name_prefix=f"assetcast-{name}")
    return pool


def _sync_pool() -> ThreadPoolExecutor:
    """Threads that wait on fsync (the GIL is released meanwhile)."""
    return worker_pool("fsync", _SYNC_THREADS)


def sync_together(paths: list[Path], *, alongside: Callable[[], object] | None = None) -> None:
    """fsync every path (files and folders) concurrently; returns once all are durable.
    ``alongside`` (another wait, e.g. :meth:`BackgroundSync.wait`) runs while they flush, so
    both land in the same journal commit."""
    if alongside is None and len(paths) <= 1:
        for path in paths:
            fsync_path(path)
        return
    pending = [_sync_pool().submit(fsync_path, path) for path in paths]
    try:
        if alongside is not None:
            alongside()
    finally:
        for future in pending:
            future.result()


def _fsync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BackgroundSync:
    """fsyncs each file of a new version as soon as it is written, on worker threads, so the
    disk flushes while the writer computes the next file; :meth:`wait` returns once every
    submitted file is durable (or raises the first failure). Each file is opened when it is
    announced, so its sync still reaches it after its folder is renamed."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._pending: list[Any] = []
        self._settled = 0  # leading futures of _pending known to be finished
        self.synced: set[str] = set()

    def written(self, path: Path) -> None:
        while len(self._pending) - self._settled >= _MAX_OPEN_SYNCS:  # bound the open fds
            self._pending[self._settled].result()
            self._settled += 1
        fd = os.open(path, os.O_RDONLY)
        try:
            self._pending.append(_sync_pool().submit(_fsync_and_close, fd))
        except BaseException:
            os.close(fd)
            raise
        self.synced.add(path.relative_to(self.root).as_posix())

    def wait(self) -> frozenset[str]:
        """Block until every submitted file is on disk; return their relative paths."""
        pending, self._pending, self._settled = self._pending, [], 0
        for future in pending:
            future.result()
        return frozenset(self.synced)

    def wait_quietly(self) -> None:
        """Let in-flight syncs finish before their files are removed (errors are moot)."""
        for future in self._pending:
            with contextlib.suppress(OSError):
                future.result()
        self._pending, self._settled = [], 0


def _tree_entries(root: Path, *, skip: frozenset[str]) -> list[Path]:
    """Every folder of ``root`` and every file not in ``skip`` (relative POSIX paths)."""
    entries: list[Path] = []
    for directory, _dirnames, filenames in os.walk(root):
        entries.append(Path(directory))
        for name in filenames:
            path = Path(directory) / name
            if path.relative_to(root).as_posix() not in skip:
                entries.append(path)
    return entries


def version_folder(digest: str) -> str:
    """The name of a LeRobot version's folder: the first 32 hex digits of its digest."""
    return digest[:32]


@contextlib.contextmanager
def parent_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock on the folder holding ``path`` (released on exit or death)."""
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class DirectoryTarget:
    """``DIR`` as a link to its current version folder."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(os.path.abspath(path))
        self.versions = self.path.parent / f".{self.path.name}{VERSIONS_SUFFIX}"

    def current(self) -> Path | None:
        """The version folder ``DIR`` points at; None when ``DIR`` does not exist;
        NotADataset when it exists and is not one of ours."""
        if not self.path.is_symlink():
            if self.path.exists():
                raise NotADataset(f"{self.path} exists and is not an assetcast dataset")
            return None
        target = Path(os.readlink(self.path))
        resolved = (self.path.parent / target) if not target.is_absolute() else target
        if resolved.parent != self.versions or not resolved.is_dir():
            raise NotADataset(
                f"{self.path} is a link to {target}, not to an assetcast dataset version"
            )
        return resolved

    def check_parent(self) -> None:
        if not self.path.parent.is_dir():
            raise NotADataset(f"{self.path.parent} is not a directory")

    def new_version(self) -> Path:
        self.versions.mkdir(exist_ok=True)
        temporary = self.versions / f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        temporary.mkdir()
        return temporary

    def publish(
        self, temporary: Path, digest: str, *, skip: frozenset[str] = frozenset(),
        written: BackgroundSync | None = None,
    ) -> Path:
        """Make ``temporary`` (complete, not yet synced) the current version. ``skip``: files
        (relative paths) that are hard links to a durable file of an earlier version, or
        whose syncs ``written`` has in flight: the link switches only once those finished
        too (they flush together with the folders, in one round)."""
        final = self.versions / version_folder(digest)
        previous = self.current()
        if final == previous:
            if written is not None:
                written.wait()
            shutil.rmtree(temporary)  # the same content is already published, whole
            return final
        if final.exists():  # a crashed writer's folder of this digest: never trusted
            os.rename(final, self.versions / f"{TEMP_PREFIX}{secrets.token_hex(6)}")
        os.rename(temporary, final)
        link = self.path.parent / f".{self.path.name}.link-{secrets.token_hex(6)}"
        os.symlink(os.path.relpath(final, self.path.parent), link)
        sync_together(
            [*_tree_entries(final, skip=skip), self.versions],
            alongside=written.wait if written is not None else None,
        )
        os.replace(link, self.path)
        fsync_directory(self.path.parent)
        self._prune(keep={final, previous})
        return final

    def discard(self, temporary: Path) -> None:
        """Drop a version that will not be published (and the versions folder, if this
        was to be the first version: a refused export leaves nothing behind)."""
        shutil.rmtree(temporary, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.versions.rmdir()

    def _prune(self, keep: set[Path | None]) -> None:
        """Remove versions nobody can be reading any more (and a crashed writer's leftovers)."""
        for entry in self.versions.iterdir():
            if entry not in keep and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
        for stray in self.path.parent.glob(f".{self.path.name}.link-*"):
            stray.unlink(missing_ok=True)


class FileTarget:
    """One file replaced atomically."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(os.path.abspath(path))

    def check_parent(self) -> None:
        if not self.path.parent.is_dir():
            raise NotADataset(f"{self.path.parent} is not a directory")

    def new_file(self) -> Path:
        self.remove_strays()
        return self.path.parent / f".{self.path.name}.{TEMP_PREFIX}{secrets.token_hex(6)}"

    def publish(self, temporary: Path) -> None:
        fsync_path(temporary)
        os.replace(temporary, self.path)
        fsync_directory(self.path.parent)

    def discard(self, temporary: Path) -> None:
        temporary.unlink(missing_ok=True)

    def remove_strays(self) -> None:
        for stray in self.path.parent.glob(f".{self.path.name}.{TEMP_PREFIX}*"):
            stray.unlink(missing_ok=True)
