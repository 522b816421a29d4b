"""Reading and re-verifying prepared snapshots (``cache/<content_sha256>/``).

The snapshot layout is a contract with the simulator and deployments (see
docs/INTERFACES.md). ``read_snapshot`` only parses; ``verify_prepared_asset``
recomputes every digest, so a snapshot edited after preparation -- a mesh byte, a
derived collision piece, or the metadata in ``snapshot.json`` -- is refused with an
``AssetValidationError`` naming the file, never used silently.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from domain.assets import AssetDescriptor, PreparedAsset
from domain.canonical import canonical_json, sha256_json
from domain.errors import AssetValidationError
from domain.paths import contained_relpath
from runtime.assets.package import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    RESERVED_DIR,
    load_json_object,
    parse_manifest,
    regular_file_size,
)
from runtime.files import file_sha256
from runtime.inputs.reading import read_inside

SNAPSHOT_SCHEMA_VERSION = 1
#: snapshot.json lists every file of a package (at most MAX_PACKAGE_FILES) with its digest.
MAX_SNAPSHOT_BYTES = 8 * MAX_MANIFEST_BYTES
SNAPSHOT_RELPATH = f"{RESERVED_DIR}/snapshot.json"
COLLISION_DIR = f"{RESERVED_DIR}/collision"
_SNAPSHOT_FIELDS = (
    "schema_version", "content_sha256", "candidate_id", "descriptor", "visual_path",
    "collision_path", "files", "collision_pieces", "derived_files", "source_locator",
)


def content_digest(descriptor: AssetDescriptor, files: dict[str, str]) -> str:
    """``content_sha256`` as DESIGN.md defines it: descriptor plus every file digest."""
    return sha256_json({"descriptor": descriptor.to_dict(), "files": dict(sorted(files.items()))})


def snapshot_bytes(asset: PreparedAsset) -> bytes:
    return canonical_json(asset.snapshot_dict()).encode("utf-8")


def _str_map(value: Any, field: str, source: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise AssetValidationError(f"{source}: {field}: expected an object of strings")
    return value


def _str(value: Any, field: str, source: str) -> str:
    if not isinstance(value, str):
        raise AssetValidationError(f"{source}: {field}: expected a string")
    return value


def _opt_str(value: Any, field: str, source: str) -> str | None:
    return None if value is None else _str(value, field, source)


def _contained(rel: str, field: str, source: str) -> str:
    """A path named by ``snapshot.json`` must be a normalized path inside the snapshot."""
    normalized = contained_relpath(
        rel, where=f"{source}: {field}", error=AssetValidationError, root="the snapshot"
    )
    if normalized != rel:
        raise AssetValidationError(f"{source}: {field}: path {rel!r} is not normalized")
    return rel


def _paths(values: Any, field: str, source: str) -> None:
    for rel in values:
        _contained(rel, field, source)


def read_snapshot(snapshot_dir: str | Path) -> PreparedAsset:
    """Parse ``.assetcast/snapshot.json`` of a snapshot folder (no hashing)."""
    folder = Path(snapshot_dir).absolute()
    path = folder / SNAPSHOT_RELPATH
    data = read_inside(
        folder, SNAPSHOT_RELPATH, limit=MAX_SNAPSHOT_BYTES, error=AssetValidationError
    )
    source = str(path)
    raw = load_json_object(data, source, allowed=_SNAPSHOT_FIELDS, required=_SNAPSHOT_FIELDS)
    if raw["schema_version"] != SNAPSHOT_SCHEMA_VERSION:
        raise AssetValidationError(
            f"{source}: schema_version: unsupported value {raw['schema_version']!r}"
        )
    pieces = raw["collision_pieces"]
    if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
        raise AssetValidationError(f"{source}: collision_pieces: expected a list of strings")
    _paths(pieces, "collision_pieces", source)
    for field in ("files", "derived_files"):
        _paths(_str_map(raw[field], field, source), field, source)
    for field in ("visual_path", "collision_path"):
        if isinstance(raw[field], str):
            _contained(raw[field], field, source)
    return PreparedAsset(
        candidate_id=_str(raw["candidate_id"], "candidate_id", source),
        content_sha256=_str(raw["content_sha256"], "content_sha256", source),
        descriptor=AssetDescriptor.from_dict(raw["descriptor"], source=source),
        snapshot_dir=str(folder),
        visual_path=_str(raw["visual_path"], "visual_path", source),
        collision_path=_opt_str(raw["collision_path"], "collision_path", source),
        files=_str_map(raw["files"], "files", source),
        collision_pieces=tuple(pieces),
        derived_files=_str_map(raw["derived_files"], "derived_files", source),
        source_locator=_str(raw["source_locator"], "source_locator", source),
    )


def _check_digests(folder: Path, recorded: dict[str, str], present: set[str], what: str) -> None:
    for rel in sorted(present - set(recorded)):
        raise AssetValidationError(f"{folder / rel}: file is not recorded in the {what}")
    for rel, digest in sorted(recorded.items()):
        if rel not in present:
            raise AssetValidationError(f"{folder / rel}: file is missing from the snapshot")
        if file_sha256(folder / rel) != digest:
            raise AssetValidationError(
                f"{folder / rel}: content does not match its recorded SHA-256"
            )


def _regular_files(folder: Path) -> set[str]:
    """Every regular file below ``folder`` as a POSIX relpath; a symlink or special file
    anywhere is refused, as ``regular_file_size`` refuses it (the entry types come from the
    directory listing, so a folder of regular files costs no stat per file)."""
    found: set[str] = set()
    pending = [(str(folder), "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                found.add(prefix + entry.name)
            elif entry.is_dir(follow_symlinks=False):
                pending.append((entry.path, f"{prefix}{entry.name}/"))
            else:  # a symlink or a special file: the shared check words the refusal
                regular_file_size(Path(entry.path), inside="a snapshot")
                raise AssetValidationError(f"{entry.path}: is not a regular file")
    return found


def _check_tree(asset: PreparedAsset, folder: Path) -> None:
    """Exactly ``asset``'s files are below ``folder``, each with its recorded SHA-256
    (symlinks and special files refused)."""
    present = _regular_files(folder)
    package = {rel for rel in present if not rel.startswith(f"{RESERVED_DIR}/")}
    derived = {rel for rel in present - package if rel != SNAPSHOT_RELPATH}
    _check_digests(folder, dict(asset.files), package, "snapshot's files")
    _check_digests(folder, dict(asset.derived_files), derived, "snapshot's derived_files")


def _check_folder(folder: Path) -> None:
    if not folder.is_dir() or folder.is_symlink():
        raise AssetValidationError(f"{folder}: snapshot folder does not exist")


def _check_metadata(asset: PreparedAsset, folder: Path) -> None:
    """``folder``'s ``snapshot.json`` is the bytes ``asset`` serializes to."""
    on_disk = read_inside(
        folder, SNAPSHOT_RELPATH, limit=MAX_SNAPSHOT_BYTES, error=AssetValidationError
    )
    if on_disk != snapshot_bytes(asset):
        raise AssetValidationError(
            f"{folder / SNAPSHOT_RELPATH}: does not match the prepared asset's metadata"
        )


def verify_staged_files(asset: PreparedAsset, folder: Path) -> None:
    """A snapshot its builder just staged in ``folder``: every byte re-read from disk
    (``snapshot.json`` compared, every file re-hashed, nothing missing or extra).

    What ``verify_prepared_asset`` adds is not re-checked: the builder computed
    ``content_sha256`` and ``derived_files`` itself, and parsed ``asset.descriptor`` from
    exactly the manifest bytes whose digest is checked here.
    """
    _check_folder(folder)
    _check_metadata(asset, folder)
    _check_tree(asset, folder)


def verify_prepared_asset(asset: PreparedAsset, *, folder: Path | None = None) -> None:
    """Recompute every digest of ``asset``'s snapshot; raise AssetValidationError on drift.

    ``folder`` verifies a copy that is not yet at ``asset.snapshot_dir``.
    """
    staged = folder is not None
    folder = Path(asset.snapshot_dir) if folder is None else Path(folder)
    meta = folder / SNAPSHOT_RELPATH
    _check_folder(folder)
    if not staged and folder.name != asset.content_sha256:
        raise AssetValidationError(f"{folder}: folder name does not match content_sha256")
    _check_metadata(asset, folder)
    if content_digest(asset.descriptor, dict(asset.files)) != asset.content_sha256:
        raise AssetValidationError(f"{meta}: content_sha256 does not match descriptor and files")
    if not set(asset.collision_pieces) <= set(asset.derived_files):
        raise AssetValidationError(f"{meta}: collision_pieces are not all derived_files")
    _check_tree(asset, folder)
    manifest_path = folder / MANIFEST_NAME
    manifest = parse_manifest(
        read_inside(folder, MANIFEST_NAME, limit=MAX_MANIFEST_BYTES, error=AssetValidationError),
        str(manifest_path),
    )
    if (
        manifest.descriptor != asset.descriptor
        or manifest.visual_path != asset.visual_path
        or manifest.collision_path != asset.collision_path
    ):
        raise AssetValidationError(f"{meta}: disagrees with {MANIFEST_NAME}")
