"""Self-contained deployment directories: one per batch, sealed by a manifest of digests.

A deployment is what collection (possibly on another machine, possibly after a crash) runs
from, so it must not depend on the cache or on the source catalog: it carries a rewritten
copy of the task, a full copy of each chosen snapshot and of the verified snapshot of every
non-role package the task references (that package and nothing else), and ``manifest.json``
listing the SHA-256 of every other file. It is written in a temporary sibling directory
and renamed into place, so ``batch_NNNN/`` either does not exist or is complete;
``validate_deployment`` proves that nothing was changed, added or removed since.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from domain.assets import PreparationContext, PreparedAsset
from domain.canonical import sha256_hex
from domain.errors import AssetcastInputError, AssetValidationError, DeploymentInvalid
from domain.matching import ResolvedAssetSet
from domain.requirements import AssetRequirements
from domain.task import PACKAGE_MANIFEST, PackageAsset, TaskSpec
from runtime.files import (
    Fence,
    file_sha256,
    fsync_directory,
    fsync_tree,
    remove_dead_temps,
    report_text,
    temp_name,
)
from runtime.inputs.reading import read_inside
from runtime.taskfile import dump_task, load_task

log = structlog.get_logger(__name__)

MANIFEST_NAME = "manifest.json"
TASK_NAME = "task.yaml"
MANIFEST_SCHEMA_VERSION = 1
TEMP_MARKER = ".partial-"
ENTITY_SCRATCH = ".entity-cache"
MAX_MANIFEST_BYTES = 64 << 20  # a digest per file of every package of one batch
_MANIFEST_KEYS = frozenset(
    {"schema_version", "batch_index", "seed", "asset_set_id", "requirements_digest", "roles",
     "files"}
)


@dataclass(frozen=True)
class Deployment:
    """A validated (or freshly written) deployment and the manifest that seals it."""

    path: Path
    batch_index: int
    asset_set_id: str
    manifest: dict[str, Any] = field(repr=False)
    manifest_sha256: str = ""

    @property
    def task_path(self) -> Path:
        """The deployment's own rewritten task file (never the user's original)."""
        return self.path / TASK_NAME


def batch_dir_name(batch_index: int) -> str:
    return f"batch_{batch_index:04d}"


def temp_dirs_for(output_dir: Path) -> list[Path]:
    """Leftover half-written deployments in ``output_dir`` (a crash between mkdir and rename)."""
    if not output_dir.is_dir():
        return []
    return sorted(
        p for p in output_dir.iterdir()
        if p.name.startswith(".batch_") and TEMP_MARKER in p.name and p.is_dir()
    )


def remove_temp_dirs(output_dir: Path, is_dead: Callable[[str], bool]) -> list[Path]:
    """Delete the leftover temporary deployment folders whose writing session is provably
    dead (``is_dead(session_id)``); returns what was removed."""
    return remove_dead_temps(temp_dirs_for(Path(output_dir)), is_dead)


def _walk_files(root: Path) -> dict[str, Path]:
    """Every regular file below ``root`` by POSIX relative path; symlinks are refused."""
    found: dict[str, Path] = {}
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(directory)
        for name in sorted(dirnames):
            if (base / name).is_symlink():
                raise DeploymentInvalid(f"{base / name}: symbolic links are not allowed")
        for name in sorted(filenames):
            path = base / name
            if path.is_symlink() or not path.is_file():
                raise DeploymentInvalid(f"{path}: only regular files are allowed")
            found[path.relative_to(root).as_posix()] = path
    return found


def _copy_tree(source: Path, target: Path) -> None:
    """Byte copy of a package/snapshot directory; refuses symlinks instead of following them."""
    for directory, dirnames, filenames in os.walk(source):
        base = Path(directory)
        relative = base.relative_to(source)
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in dirnames:
            if (base / name).is_symlink():
                raise AssetValidationError(f"{base / name}: symbolic links are not allowed")
        for name in filenames:
            path = base / name
            if path.is_symlink() or not path.is_file():
                raise AssetValidationError(f"{path}: only regular files are allowed")
            shutil.copyfile(path, target / relative / name)


def _entity_snapshots(spec: TaskSpec, task_path: Path, staging: Path) -> dict[str, PreparedAsset]:
    """Non-role packages verified and snapshotted into a scratch cache inside ``staging``
    (for callers that did not prepare them in the run's cache)."""
    from runtime.assets.entity_packages import entity_package_dirs, prepare_entity_packages

    packages = entity_package_dirs(spec, task_path)
    if not packages:
        return {}
    return prepare_entity_packages(packages, PreparationContext(str(staging / ENTITY_SCRATCH)))


def _rewrite_task(
    spec: TaskSpec,
    requirements: AssetRequirements,
    role_packages: Mapping[str, str],
    entity_assets: Mapping[str, PreparedAsset],
    staging: Path,
) -> TaskSpec:
    """The task of the deployment: role assets point into ``assets/``, other packages' verified
    snapshots are copied under ``entities/<entity_id>/``: nothing outside is referenced."""
    entity_roles = {req.entity_id: role for role, req in requirements.roles.items()}
    entities = []
    for entity in spec.scene.entities:
        asset = entity.asset
        if entity.entity_id in entity_roles:
            asset = PackageAsset(role_packages[entity_roles[entity.entity_id]])
        elif isinstance(asset, PackageAsset):
            snapshot = entity_assets.get(entity.entity_id)
            if snapshot is None:
                raise AssetValidationError(
                    f"{asset.package}: package of entity {entity.entity_id!r} was not prepared"
                )
            _copy_tree(Path(snapshot.snapshot_dir), staging / "entities" / entity.entity_id)
            asset = PackageAsset(f"entities/{entity.entity_id}/{PACKAGE_MANIFEST}")
        entities.append(replace(entity, asset=asset))
    return replace(spec, scene=replace(spec.scene, entities=tuple(entities)))


def materialize_deployment(
    task: TaskSpec | str | Path,
    requirements: AssetRequirements,
    resolved: ResolvedAssetSet,
    *,
    output_dir: str | Path,
    batch_index: int,
    task_path: str | Path | None = None,
    fence: Fence | None = None,
    entity_assets: Mapping[str, PreparedAsset] | None = None,
) -> Deployment:
    """Write ``output_dir`` (``batch_NNNN``) atomically and return its sealed description.

    ``task`` is the task file or its parsed spec; with a spec, ``task_path`` locates the file so
    that relative package paths of non-role entities can be resolved. ``entity_assets`` are
    those entities' prepared snapshots (entity id -> asset); without them they are prepared
    here, in a scratch cache. An existing ``output_dir`` is replaced (moved aside, then
    deleted): callers only materialize batches the log says are not done. ``fence`` (the
    session) is checked right before the rename that publishes the folder and names the
    temporary folders, so resume can tell whose they are.
    """
    if isinstance(task, TaskSpec):
        if task_path is None:
            raise TypeError("task_path is required when a TaskSpec is given")
        spec, source = task, Path(task_path)
    else:
        source = Path(task)
        spec = load_task(source)
    target = Path(output_dir).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    stem = temp_name(f".{target.name}{TEMP_MARKER}", fence)
    staging = target.parent / f"{stem}{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        roles: dict[str, dict[str, str]] = {}
        role_packages: dict[str, str] = {}
        for role in sorted(resolved.assets):
            asset = resolved.assets[role]
            sha = asset.content_sha256
            package = f"assets/{sha}/asset.catalog.json"
            if not (staging / "assets" / sha).exists():
                _copy_tree(Path(asset.snapshot_dir), staging / "assets" / sha)
            if not (staging / package).is_file():
                raise AssetValidationError(
                    f"{asset.snapshot_dir}: snapshot has no asset.catalog.json"
                )
            role_packages[role] = package
            roles[role] = {
                "entity_id": requirements.roles[role].entity_id,
                "asset_id": asset.asset_id,
                "content_sha256": sha,
                "package": package,
            }
        if entity_assets is None:
            entity_assets = _entity_snapshots(spec, source, staging)
        deployed = _rewrite_task(spec, requirements, role_packages, entity_assets, staging)
        shutil.rmtree(staging / ENTITY_SCRATCH, ignore_errors=True)
        (staging / TASK_NAME).write_text(dump_task(deployed), encoding="utf-8")
        files = {rel: file_sha256(path) for rel, path in _walk_files(staging).items()}
        manifest = {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "batch_index": batch_index,
            "seed": resolved.seed,
            "asset_set_id": resolved.set_id,
            "requirements_digest": resolved.requirements_digest,
            "roles": roles,
            "files": files,
        }
        manifest_bytes = report_text(manifest).encode("utf-8")
        (staging / MANIFEST_NAME).write_bytes(manifest_bytes)
        fsync_tree(staging)
        if fence is not None:
            fence.check()
        if _already_published(target, manifest_bytes):
            shutil.rmtree(staging, ignore_errors=True)  # idempotent: the same bytes are there
        else:
            aside = target.parent / f"{stem}old-{secrets.token_hex(4)}"
            if target.exists():
                os.rename(target, aside)
            os.rename(staging, target)
            fsync_directory(target.parent)
            shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("deployment.materialized", path=str(target), asset_set_id=resolved.set_id)
    return Deployment(target, batch_index, resolved.set_id, manifest, sha256_hex(manifest_bytes))


def _already_published(target: Path, manifest_bytes: bytes) -> bool:
    """``target`` is a valid deployment sealed by exactly ``manifest_bytes``: publishing
    again would only make the folder vanish for a moment under a reader."""
    if not (target / MANIFEST_NAME).is_file():
        return False
    try:
        validate_deployment(target, expected_manifest_sha256=sha256_hex(manifest_bytes))
    except AssetcastInputError:
        return False
    return True


def _load_manifest(path: Path, expected_sha256: str | None) -> tuple[dict[str, Any], str]:
    manifest_path = path / MANIFEST_NAME
    if not manifest_path.is_file():
        raise DeploymentInvalid(f"{manifest_path}: manifest is missing")
    raw = read_inside(path, MANIFEST_NAME, limit=MAX_MANIFEST_BYTES, error=DeploymentInvalid)
    digest = sha256_hex(raw)
    if expected_sha256 is not None and digest != expected_sha256:
        raise DeploymentInvalid(
            f"{manifest_path}: manifest digest {digest} differs from the recorded {expected_sha256}"
        )
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DeploymentInvalid(f"{manifest_path}: not valid JSON ({error})") from error
    if not isinstance(manifest, dict) or set(manifest) != _MANIFEST_KEYS:
        raise DeploymentInvalid(f"{manifest_path}: unexpected manifest fields")
    if manifest["schema_version"] != MANIFEST_SCHEMA_VERSION:
        raise DeploymentInvalid(f"{manifest_path}: unsupported schema_version")
    files, roles = manifest["files"], manifest["roles"]
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise DeploymentInvalid(f"{manifest_path}: files must map paths to digests")
    if not isinstance(roles, dict):
        raise DeploymentInvalid(f"{manifest_path}: roles must be a mapping")
    if TASK_NAME not in files:
        raise DeploymentInvalid(f"{path / TASK_NAME}: not listed in the manifest")
    for role, entry in roles.items():
        package = entry.get("package") if isinstance(entry, dict) else None
        sha = entry.get("content_sha256") if isinstance(entry, dict) else None
        if package != f"assets/{sha}/asset.catalog.json" or package not in files:
            raise DeploymentInvalid(f"{manifest_path}: role {role!r} names an unlisted package")
    if not isinstance(manifest["batch_index"], int) or not isinstance(
        manifest["asset_set_id"], str
    ):
        raise DeploymentInvalid(f"{manifest_path}: batch_index/asset_set_id malformed")
    return manifest, digest


def _check_task_agrees(root: Path, manifest: dict[str, Any]) -> None:
    """The manifest's roles and requirements digest must be what ``task.yaml`` says, so an
    edited manifest is caught even when the recorded manifest digest is not at hand."""
    manifest_path = root / MANIFEST_NAME
    try:
        spec = load_task(root / TASK_NAME)
    except AssetcastInputError as error:
        raise DeploymentInvalid(f"{root / TASK_NAME}: {error}") from error
    requirements = spec.asset_requirements
    if requirements is None or requirements.digest() != manifest["requirements_digest"]:
        raise DeploymentInvalid(f"{manifest_path}: requirements_digest disagrees with task.yaml")
    if set(requirements.roles) != set(manifest["roles"]):
        raise DeploymentInvalid(f"{manifest_path}: roles disagree with task.yaml")
    for role, entry in manifest["roles"].items():
        entity_id = requirements.roles[role].entity_id
        asset = spec.entity(entity_id).asset
        if entry.get("entity_id") != entity_id or not isinstance(asset, PackageAsset) or (
            asset.package != entry["package"]
        ):
            raise DeploymentInvalid(f"{manifest_path}: role {role!r} disagrees with task.yaml")
    for entity in spec.scene.entities:
        if isinstance(entity.asset, PackageAsset) and entity.asset.package not in manifest["files"]:
            raise DeploymentInvalid(
                f"{root / entity.asset.package}: package of {entity.entity_id!r} is not listed"
            )


def validate_deployment(
    path: str | Path, *, expected_manifest_sha256: str | None = None
) -> Deployment:
    """Prove the directory is exactly what was materialized; ``DeploymentInvalid`` names the
    first changed, missing or extra file (or the manifest, if it was edited)."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise DeploymentInvalid(f"{root}: deployment directory does not exist")
    manifest, digest = _load_manifest(root, expected_manifest_sha256)
    present = _walk_files(root)
    present.pop(MANIFEST_NAME, None)
    expected: dict[str, str] = manifest["files"]
    for rel in sorted(expected):
        if rel not in present:
            raise DeploymentInvalid(f"{root / rel}: file listed in the manifest is missing")
    for rel in sorted(present):
        if rel not in expected:
            raise DeploymentInvalid(f"{root / rel}: file is not listed in the manifest")
    for rel in sorted(expected):
        if file_sha256(present[rel]) != expected[rel]:
            raise DeploymentInvalid(f"{root / rel}: SHA-256 differs from the manifest")
    _check_task_agrees(root, manifest)
    return Deployment(root, manifest["batch_index"], manifest["asset_set_id"], manifest, digest)
