"""Where a dataset version's files are written: a private directory, every file hashed."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from domain.canonical import sha256_hex
from runtime.files import file_sha256


class FileSink:
    """Writes files under ``root`` and remembers each one's SHA-256 (relative POSIX path)."""

    def __init__(self, root: Path, *, on_written: Callable[[Path], None] | None = None) -> None:
        self.root = Path(root)
        self.on_written = on_written
        self.files: dict[str, str] = {}
        self.bytes_written = 0
        self.linked: set[str] = set()
        self._lock = threading.Lock()  # files may be written from encoder threads
        self._folders: set[Path] = set()

    def write(self, relpath: str, data: bytes | memoryview) -> None:
        target = self.root / relpath
        self._make_parent(target)
        target.write_bytes(data)
        digest = sha256_hex(data)
        with self._lock:
            if self.on_written is not None:
                self.on_written(target)
            self.files[relpath] = digest
            self.bytes_written += len(data)

    def write_with(
        self, relpath: str, encode: Callable[[Any], bytes | memoryview], value: Any
    ) -> None:
        """:meth:`write` of ``encode(value)`` (a job for an encoder thread)."""
        self.write(relpath, encode(value))

    def make_folders(self, relpaths: list[str]) -> None:
        """Create the folders of files about to be written (each once)."""
        for relpath in relpaths:
            self._make_parent(self.root / relpath)

    def _make_parent(self, target: Path) -> None:
        """Create the folder of ``target`` once per sink (not one mkdir call per file)."""
        parent = target.parent
        if parent not in self._folders:
            parent.mkdir(parents=True, exist_ok=True)
            self._folders.add(parent)

    def link(self, relpath: str, existing: Path, *, digest: str) -> None:
        """Take over a file of the previous version unchanged (``digest``: its SHA-256, already
        checked): a hard link (no bytes are copied or synced again), or a copy where the file
        system refuses links."""
        target = self.root / relpath
        self._make_parent(target)
        try:
            os.link(existing, target)
        except OSError:
            shutil.copyfile(existing, target)
            self.linked.discard(relpath)
            self.files[relpath] = file_sha256(target)
            self.bytes_written += target.stat().st_size
            return
        self.files[relpath] = digest
        self.bytes_written += target.stat().st_size
        self.linked.add(relpath)

    def adopt(self, relpath: str, digest: str, size: int) -> None:
        """Record a file written in place by a library (e.g. HDF5) after it was closed."""
        self.files[relpath] = digest
        self.bytes_written += size

    def sorted_files(self) -> dict[str, str]:
        return {k: self.files[k] for k in sorted(self.files)}
