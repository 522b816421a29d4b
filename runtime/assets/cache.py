"""Materializing a package into the content-addressed cache.

Order matters for trust: we read every package file once, hash exactly those
bytes, and write exactly those bytes into a private temporary folder inside the
cache; references and meshes are then checked *on that copy*, collision pieces
derived from it, and only a fully verified folder is renamed to
``<cache>/<content_sha256>``. A crash leaves at most a ``.tmp-*`` folder, never a
half-written snapshot under a digest name.

Publishing is fenced: right before the rename the temporary folder is verified again
against the digests it will be published under (so a folder someone else emptied or
altered is never published) and the session's lease is checked (so a session that was
taken over publishes nothing) -- once per snapshot, or once for a batch published by the lease
holder (``publish_staged``: the check reads the lease row, and per snapshot it cost more than
the snapshot's own verification). Temporary folders carry their session's
``<session_id>.<token>``, so resume deletes only those of provably dead sessions.

An existing snapshot with the same digest is re-verified and reused. If it fails
verification it is *not* replaced or deleted: it is evidence of tampering or
corruption, and the error says so; a person must remove it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import structlog

from domain.assets import AssetDescriptor, PreparationContext, PreparedAsset, PublishFence
from domain.canonical import sha256_hex
from domain.errors import AssetValidationError
from domain.limits import MeshLimits
from runtime.assets.collision import convex_pieces
from runtime.assets.mesh_writers import obj_bytes
from runtime.assets.meshes import load_mesh_arrays
from runtime.assets.package import PackageManifest, read_package
from runtime.assets.snapshot import (
    COLLISION_DIR,
    content_digest,
    read_snapshot,
    snapshot_bytes,
    verify_prepared_asset,
    verify_staged_files,
)
from runtime.files import fsync_directory, fsync_tree, temp_name
from runtime.syncfs import make_entries_durable, make_trees_durable

log = structlog.get_logger(__name__)

BOUNDS_TOLERANCE_M = 1e-6
TMP_PREFIX = ".tmp-"


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _write_file(
    path: Path, data: bytes, *, sync: bool = True, made: set[Path] | None = None
) -> None:
    """Create (and with ``sync`` fsync) one new file of a private temporary folder; ``made``
    remembers the folders already created, so a snapshot costs one mkdir per folder."""
    parent = path.parent
    if made is None or parent not in made:
        parent.mkdir(parents=True, exist_ok=True)
        if made is not None:
            while parent not in made and parent != parent.parent:
                made.add(parent)
                parent = parent.parent
    fd = os.open(path, _CREATE, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _check_bounds(descriptor: AssetDescriptor, bounds: np.ndarray, label: str) -> None:
    if descriptor.bounds_m is None:
        return
    declared = np.array([descriptor.bounds_m.lower, descriptor.bounds_m.upper])
    deviation = float(np.max(np.abs(declared - bounds)))
    if deviation > BOUNDS_TOLERANCE_M:
        raise AssetValidationError(
            f"{label}: descriptor.bounds_m does not match the visual mesh bounds "
            f"(off by {deviation:.3g} m; mesh lower={bounds[0].tolist()} "
            f"upper={bounds[1].tolist()})"
        )


def _reuse(folder: Path) -> PreparedAsset:
    try:
        asset = read_snapshot(folder)
        verify_prepared_asset(asset)
    except AssetValidationError as exc:
        exc.add_note(f"cache entry {folder} was kept as evidence; remove it to prepare again")
        log.warning("asset_snapshot_rejected", snapshot_dir=str(folder), error=str(exc))
        raise
    log.debug("asset_snapshot_reused", snapshot_dir=str(folder))
    return asset


def _build(
    tmp: Path,
    package_dir: Path,
    data: dict[str, bytes],
    digests: dict[str, str],
    manifest: PackageManifest,
    *,
    candidate_id: str,
    locator: str,
    final: Path,
    sync: bool = True,
    limits: MeshLimits,
) -> PreparedAsset:
    # References and header sizes were checked by read_package; the loader runs on the copy.
    made = {tmp}
    for rel, payload in data.items():
        _write_file(tmp / rel, payload, sync=sync, made=made)
    visual_vertices, visual_faces = load_mesh_arrays(
        tmp / manifest.visual_path, data[manifest.visual_path],
        label=str(package_dir / manifest.visual_path), limits=limits,
    )
    bounds = np.array([visual_vertices.min(axis=0), visual_vertices.max(axis=0)])
    _check_bounds(manifest.descriptor, bounds, str(package_dir / manifest.visual_path))
    vertices, faces = visual_vertices, visual_faces
    # Paths are normalized by parse_manifest, so equal strings are the same file.
    if manifest.collision_path and manifest.collision_path != manifest.visual_path:
        vertices, faces = load_mesh_arrays(
            tmp / manifest.collision_path, data[manifest.collision_path],
            label=str(package_dir / manifest.collision_path), limits=limits,
        )
    pieces, method = convex_pieces(
        vertices, faces, manifest.descriptor, max_pieces=limits.max_collision_pieces
    )
    derived: dict[str, str] = {}
    names = []
    for index, piece in enumerate(pieces):
        rel = f"{COLLISION_DIR}/piece_{index:03d}.obj"
        payload = obj_bytes(piece.vertices, piece.faces, comment=f"assetcast convex piece {index}")
        _write_file(tmp / rel, payload, sync=sync, made=made)
        derived[rel] = sha256_hex(payload)
        names.append(rel)
    asset = PreparedAsset(
        candidate_id=candidate_id,
        content_sha256=final.name,
        descriptor=manifest.descriptor,
        snapshot_dir=str(final),
        visual_path=manifest.visual_path,
        collision_path=manifest.collision_path,
        files=digests,
        collision_pieces=tuple(names),
        derived_files=derived,
        source_locator=locator,
    )
    _write_file(tmp / ".assetcast" / "snapshot.json", snapshot_bytes(asset), sync=sync, made=made)
    # Every folder (``.assetcast/`` holds snapshot.json and ``collision/``); the files
    # were fsynced as they were written.
    if sync:  # a staged folder is made durable by its publisher, with its whole batch
        fsync_tree(tmp, files=False)
    log.debug("asset_collision_pieces", asset_id=asset.asset_id, method=method, pieces=len(names))
    return asset


def _verify_staged(asset: PreparedAsset, tmp: Path) -> None:
    """The temporary folder, re-read, is exactly the snapshot its name will claim.

    Every file's bytes are re-read and re-hashed and ``snapshot.json`` compared byte for
    byte (``verify_staged_files``); the content digest is recomputed from the descriptor and
    the file digests it will be published under.
    """
    if content_digest(asset.descriptor, dict(asset.files)) != asset.content_sha256:
        raise AssetValidationError(f"{tmp}: content digest changed while it was prepared")
    try:
        verify_staged_files(asset, tmp)
    except AssetValidationError as exc:
        exc.add_note(f"{tmp} was not published under {asset.content_sha256}")
        raise


def _publish(asset: PreparedAsset, tmp: Path, fence: PublishFence | None) -> PreparedAsset:
    """Fence, then rename ``tmp`` to its digest name; an identical snapshot published first
    by someone else is reused (and ``tmp`` removed). The caller makes the rename durable."""
    if fence is not None:
        fence.check()
    final = Path(asset.snapshot_dir)
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.exists():
            raise
        # Another preparer won the race with the same content: use theirs.
        shutil.rmtree(tmp, ignore_errors=True)
        return _reuse(final)
    return asset


def publish_staged(
    staged: Sequence[tuple[PreparedAsset, str]], context: PreparationContext
) -> list[PreparedAsset | AssetValidationError]:
    """Publish snapshots staged by worker processes (``context.staging``), as one batch.

    One file-system sync makes every staged folder durable; each is then verified again
    against the digests it will be published under; one fence check (a read of the lease
    row) right before the batch's renames, which then follow back to back; a final sync makes
    the renames durable. Returns, in order, the published (or reused) asset or the
    verification error of a folder that changed since it was staged (that folder is removed,
    not published). A lost lease raises, after every folder not yet published is removed.
    """
    if not staged:
        return []
    cache_dir = Path(context.cache_dir).absolute()
    make_trees_durable([Path(tmp) for _asset, tmp in staged], cache_dir)
    results: list[PreparedAsset | AssetValidationError | None] = [None] * len(staged)
    settled = 0  # staged[:settled] are published or removed
    try:
        verified: list[int] = []
        for index, (asset, tmp) in enumerate(staged):
            try:
                _verify_staged(asset, Path(tmp))
            except AssetValidationError as error:
                shutil.rmtree(tmp, ignore_errors=True)
                results[index] = error
                continue
            verified.append(index)
        if verified and context.fence is not None:
            context.fence.check()
        for index, (asset, tmp) in enumerate(staged):
            if results[index] is None:
                results[index] = _publish(asset, Path(tmp), None)
            settled = index + 1
    except BaseException:
        for _asset, tmp in staged[settled:]:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    make_entries_durable(cache_dir)
    return [result for result in results if result is not None]  # every slot is filled


def prepare_package(
    package_dir: str | Path, *, candidate_id: str, locator: str, context: PreparationContext
) -> PreparedAsset:
    """Copy, verify and snapshot one package; reuse a verified snapshot of the same content."""
    contents = read_package(package_dir, context.limits)
    package_dir, data, digests, manifest = (
        contents.package_dir, contents.data, contents.digests, contents.manifest
    )
    content_sha256 = content_digest(manifest.descriptor, digests)
    cache_dir = Path(context.cache_dir).absolute()
    cache_dir.mkdir(parents=True, exist_ok=True)
    final = cache_dir / content_sha256
    if final.exists():
        return _reuse(final)
    fence = context.fence
    tmp = cache_dir / f"{temp_name(TMP_PREFIX, fence)}{content_sha256[:16]}-{uuid.uuid4().hex}"
    tmp.mkdir()
    staging = context.staging is not None
    try:
        asset = _build(
            tmp, package_dir, data, digests, manifest,
            candidate_id=candidate_id, locator=locator, final=final, limits=context.limits,
            sync=not staging,
        )
        if staging:
            # Verified (and fenced) by the lease holder right before its rename, in
            # publish_staged; verifying here as well would only hash the same bytes twice.
            context.staging.append(str(tmp))  # type: ignore[union-attr]
            return asset
        _verify_staged(asset, tmp)
        published = _publish(asset, tmp, fence)
        if published is not asset:
            return published
        fsync_directory(cache_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.debug(
        "asset_prepared", asset_id=asset.asset_id, content_sha256=content_sha256,
        pieces=len(asset.collision_pieces),
    )
    return asset
