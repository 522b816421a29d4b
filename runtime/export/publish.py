"""Atomic dataset versions: a reader sees the previous complete version or the new one.

A LeRobot dataset is a directory, so ``DIR`` is a symbolic link to a complete version
directory ``.<name>.assetcast/<digest>`` beside it. A new version is written into a temporary
directory there, fsynced file by file and folder by folder, renamed to its digest, and only
then published by atomically replacing the link (``rename`` of a new link over the old one,
then an fsync of the parent). The previous version is kept, so a reader that resolved the link
just before the switch still reads a whole dataset; older ones are removed.

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
from collections.abc import Iterator
from pathlib import Path

from runtime.export.errors import NotADataset
from runtime.files import fsync_directory, fsync_tree

VERSIONS_SUFFIX = ".assetcast"
TEMP_PREFIX = "tmp-"


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

    def publish(self, temporary: Path, digest: str) -> Path:
        """Make ``temporary`` (complete, not yet synced) the current version."""
        final = self.versions / digest[:32]
        previous = self.current()
        if final.is_dir():
            shutil.rmtree(temporary)  # the same content is already there, whole
        else:
            fsync_tree(temporary)
            os.rename(temporary, final)
            fsync_directory(self.versions)
        if previous != final:
            link = self.path.parent / f".{self.path.name}.link-{secrets.token_hex(6)}"
            os.symlink(os.path.relpath(final, self.path.parent), link)
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
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        fsync_directory(self.path.parent)

    def discard(self, temporary: Path) -> None:
        temporary.unlink(missing_ok=True)

    def remove_strays(self) -> None:
        for stray in self.path.parent.glob(f".{self.path.name}.{TEMP_PREFIX}*"):
            stray.unlink(missing_ok=True)
