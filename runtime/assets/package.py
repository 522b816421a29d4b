"""Reading an asset package from disk: its file list and its manifest.

A package is a plain directory tree. We refuse anything that could make the bytes
we hash differ from the bytes a simulator later reads (symlinks, special files),
and we read the manifest with a JSON decoder that rejects duplicate keys,
NaN/Infinity and deep nesting, because those would make the canonical descriptor
ambiguous (or crash whatever walks it). Every file is read through the bounded reader
(``runtime.inputs.reading``): regular files only, never a FIFO or a device.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.assets import AssetDescriptor
from domain.canonical import sha256_hex
from domain.errors import AssetValidationError
from domain.limits import MeshLimits, MeshTooLarge
from runtime.assets.mesh_counts import check_declared_counts
from runtime.assets.references import check_reference_path, check_references, mesh_format
from runtime.inputs.json_text import load_json_strict as _load_json
from runtime.inputs.reading import kind_of, read_inside

MANIFEST_NAME = "asset.catalog.json"
RESERVED_DIR = ".assetcast"
MAX_MANIFEST_BYTES = 1 << 20
MAX_PACKAGE_FILES = 4096
#: Packages are read into memory once (hash and copy the same bytes), so cap their size:
#: with a mesh at the default face limit (about 750 MB to prepare, bench_mesh_limits.py) the
#: whole package stays near 1 GB. An ASCII STL at the face limit is about 130 MB.
MAX_PACKAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class PackageManifest:
    """The parsed ``asset.catalog.json`` of a package."""

    descriptor: AssetDescriptor
    visual_path: str
    collision_path: str | None


def walk_tree(folder: Path) -> Iterator[Path]:
    """Every entry below ``folder`` (files and folders), each folder's entries sorted by name.

    Symlinked folders are listed but not entered, so the caller's check sees them.
    """
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            yield base / name


def regular_file_size(path: Path, *, inside: str) -> int | None:
    """Size of ``path`` if it is a regular file, ``None`` for a folder.

    Symlinks and special files are refused (``inside`` names the tree, e.g. "a package"):
    the bytes we hash must be the bytes a simulator later reads, and a link could point
    elsewhere. One ``lstat`` answers both the type and the size.
    """
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise AssetValidationError(f"{path}: symlinks are not allowed in {inside}")
    if stat.S_ISDIR(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode):
        raise AssetValidationError(f"{path}: is {kind_of(info.st_mode)}, not a regular file")
    return info.st_size


def list_package_files(package_dir: Path) -> list[str]:
    """Every regular file below ``package_dir`` as sorted POSIX relpaths.

    Symlinks (to files or folders), special files and a ``.assetcast`` folder are
    refused: a snapshot must be a faithful byte copy that cannot point elsewhere.
    """
    if package_dir.is_symlink():
        raise AssetValidationError(f"{package_dir}: package folder is a symlink")
    if not package_dir.is_dir():
        raise AssetValidationError(f"{package_dir}: package folder does not exist")
    found: list[str] = []
    total = 0
    for path in walk_tree(package_dir):
        rel = path.relative_to(package_dir).as_posix()
        if rel == RESERVED_DIR:
            raise AssetValidationError(
                f"{path}: a package may not contain a {RESERVED_DIR}/ folder"
            )
        size = regular_file_size(path, inside="a package")
        if size is None:
            continue
        found.append(rel)
        total += size
        if total > MAX_PACKAGE_BYTES:
            raise AssetValidationError(
                f"{package_dir}: package is larger than {MAX_PACKAGE_BYTES} bytes"
            )
        if len(found) > MAX_PACKAGE_FILES:
            raise AssetValidationError(
                f"{package_dir}: package has more than {MAX_PACKAGE_FILES} files"
            )
    if MANIFEST_NAME not in found:
        raise AssetValidationError(f"{package_dir / MANIFEST_NAME}: file is missing")
    return sorted(found)


def load_json_strict(data: bytes, source: str) -> Any:
    """Decode JSON refusing deep nesting, duplicate keys and NaN/Infinity; errors name
    ``source``."""
    return _load_json(data, source, error=AssetValidationError)


def load_json_object(
    data: bytes, source: str, *, allowed: Sequence[str], required: Sequence[str]
) -> dict[str, Any]:
    """Strictly decode a JSON object whose fields are exactly known: unknown fields
    are an error (a typo must not be silently ignored), and so are missing required ones."""
    raw = load_json_strict(data, source)
    if not isinstance(raw, dict):
        raise AssetValidationError(f"{source}: top level must be an object")
    for key in sorted(raw):
        if key not in allowed:
            raise AssetValidationError(f"{source}: {key}: unknown field")
    for key in required:
        if key not in raw:
            raise AssetValidationError(f"{source}: {key}: required field is missing")
    return raw


def parse_manifest(data: bytes, source: str) -> PackageManifest:
    """Strictly decode ``asset.catalog.json`` bytes (paths checked, existence not)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise AssetValidationError(f"{source}: larger than {MAX_MANIFEST_BYTES} bytes")
    raw = load_json_object(
        data,
        source,
        allowed=("descriptor", "visual_path", "collision_path"),
        required=("descriptor", "visual_path"),
    )
    descriptor = AssetDescriptor.from_dict(raw["descriptor"], source=source)
    paths: dict[str, str | None] = {}
    for key in ("visual_path", "collision_path"):
        value = raw.get(key)
        if value is None and key == "collision_path":
            paths[key] = None
            continue
        if not isinstance(value, str):
            raise AssetValidationError(f"{source}: {key}: expected a relative path string")
        paths[key] = check_reference_path(value, "", where=f"{source}: {key}")
        mesh_format(value, where=f"{source}: {key}")
    visual = paths["visual_path"]
    assert visual is not None
    return PackageManifest(descriptor, visual, paths["collision_path"])


def read_manifest(package_dir: Path) -> PackageManifest:
    path = package_dir / MANIFEST_NAME
    data = read_inside(
        package_dir, MANIFEST_NAME, limit=MAX_MANIFEST_BYTES, error=AssetValidationError
    )
    return parse_manifest(data, str(path))


@dataclass(frozen=True)
class PackageContents:
    """Every file of a package read once (the bytes that are hashed are the bytes copied),
    its digests and its manifest, with references and mesh sizes already checked."""

    package_dir: Path
    data: dict[str, bytes]
    digests: dict[str, str]
    manifest: PackageManifest


def read_package(package_dir: str | Path, limits: MeshLimits) -> PackageContents:
    """Read and statically verify a package without loading a mesh: regular files only,
    within the size caps, a valid manifest, every reference inside the package, every mesh
    within ``limits`` by its header. Cheap enough to run before a run is created."""
    package_dir = Path(package_dir).absolute()
    data: dict[str, bytes] = {}
    budget = MAX_PACKAGE_BYTES
    for rel in list_package_files(package_dir):
        data[rel] = read_inside(package_dir, rel, limit=budget, error=AssetValidationError)
        budget -= len(data[rel])
    digests = {rel: sha256_hex(payload) for rel, payload in data.items()}
    manifest = parse_manifest(data[MANIFEST_NAME], str(package_dir / MANIFEST_NAME))
    entries = [manifest.visual_path]
    if manifest.collision_path and manifest.collision_path != manifest.visual_path:
        entries.append(manifest.collision_path)
    for entry in entries:
        try:
            check_references(entry, data)
            check_declared_counts(entry, data, limits, label=str(package_dir / entry))
        except MeshTooLarge:
            raise  # already names the file and the limit
        except AssetValidationError as exc:  # names the package relpath: make it a full path
            raise AssetValidationError(f"{package_dir}/{exc}") from exc
    return PackageContents(package_dir, data, digests, manifest)
