"""Where a dataset version's files are written: a private directory, every file hashed."""

from __future__ import annotations

from pathlib import Path

from domain.canonical import sha256_hex


class FileSink:
    """Writes files under ``root`` and remembers each one's SHA-256 (relative POSIX path)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.files: dict[str, str] = {}
        self.bytes_written = 0

    def write(self, relpath: str, data: bytes) -> None:
        target = self.root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.files[relpath] = sha256_hex(data)
        self.bytes_written += len(data)

    def adopt(self, relpath: str, digest: str, size: int) -> None:
        """Record a file written in place by a library (e.g. HDF5) after it was closed."""
        self.files[relpath] = digest
        self.bytes_written += size

    def sorted_files(self) -> dict[str, str]:
        return {k: self.files[k] for k in sorted(self.files)}
