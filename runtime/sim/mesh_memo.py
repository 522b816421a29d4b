"""What a mesh file yields (its collision piece, its closed volume), remembered by its bytes.

Every batch's deployment holds its own copy of each asset's files, and each copy is loaded more
than once: by the collector (the non-role entities' identity check and the new role bodies,
every batch) and by the robomimic writer (the scene model of each batch). Loading is the
expensive part, and for the small meshes assets are mostly made of almost all of it is
trimesh's and qhull's fixed cost, not the bytes. So the results are kept, keyed by the SHA-256
of exactly the bytes they were computed from (the file is read once, hashed, and parsed from
that copy): a changed file is a different key, never a stale hit, whatever its path, size or
times. Formats that can pull in other files (a ``.gltf``'s buffers) are not remembered, since
their key would not cover every input; they are parsed from their path each time, as before.

Failures are never remembered: their messages name the file that was read.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import trimesh

from domain.canonical import sha256_hex
from runtime.sim.errors import SceneBuildError

# Formats trimesh reads from one file alone (with materials skipped): their bytes are all
# that shapes the result.
SELF_CONTAINED = frozenset({".obj", ".stl", ".ply", ".off", ".glb"})
MAX_REMEMBERED_BYTES = 64 << 20  # arrays kept, at most (least recently used go first)

T = TypeVar("T")
_MISSING = object()


class _Memo:
    """A bounded, thread-safe map (kind, SHA-256, format) -> result, least recently used out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: OrderedDict[tuple[str, str, str], tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> Any:
        """The remembered value (which may be None), or ``_MISSING``."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return _MISSING
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, str, str], value: Any, size: int) -> None:
        if size > self.limit:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.limit:
                _key, (_value, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_MEMO = _Memo(MAX_REMEMBERED_BYTES)


def forget_all() -> None:
    """Drop everything remembered (tests; a process that wants its memory back)."""
    _MEMO.clear()


def load_mesh_bytes(path: Path, data: bytes | None) -> trimesh.Trimesh:
    """Parse a mesh from ``data`` (its bytes, read once) or, for formats that reference other
    files, from ``path``; references resolve beside ``path`` either way."""
    try:
        if data is None:
            mesh = trimesh.load(str(path), force="mesh", process=False, skip_materials=True)
        else:
            mesh = trimesh.load(
                io.BytesIO(data), file_type=path.suffix.lower().lstrip("."),
                resolver=trimesh.resolvers.FilePathResolver(str(path)),
                force="mesh", process=False, skip_materials=True,
            )
    except Exception as error:  # trimesh raises many types for bad files
        raise SceneBuildError(f"{path}: cannot load mesh ({error})") from error
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.vertices) < 4:
        raise SceneBuildError(f"{path}: mesh has no usable geometry")
    return mesh


def _read(path: Path) -> bytes | None:
    if path.suffix.lower() not in SELF_CONTAINED:
        return None
    try:
        return path.read_bytes()
    except OSError as error:
        raise SceneBuildError(f"{path}: cannot load mesh ({error})") from error


def derived(
    kind: str, path: Path, compute: Callable[[trimesh.Trimesh], T], size_of: Callable[[T], int],
    loaded: dict[Any, trimesh.Trimesh],
) -> T:
    """``compute(mesh of path)``, remembered under ``kind`` and the file's bytes. ``loaded``
    (the caller's, for one package): meshes parsed so far, so a file serving twice (as a
    piece and as the mass source) is parsed once even when neither result is remembered."""
    data = _read(path)
    content = ("path", str(path)) if data is None else (sha256_hex(data), path.suffix.lower())
    if data is not None:
        found = _MEMO.get((kind, *content))
        if found is not _MISSING:
            return found  # type: ignore[no-any-return]
    mesh = loaded.get(content)
    if mesh is None:
        mesh = loaded[content] = load_mesh_bytes(path, data)
    value = compute(mesh)
    if data is not None:
        _MEMO.put((kind, *content), value, size_of(value))
    return value
