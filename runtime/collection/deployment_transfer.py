"""Deployments travel to workers by content, never by a shared path.

A worker on another machine cannot read the driver's ``batch_NNNN/`` folder. The driver
packs a deployment as bytes (``manifest.json`` plus every file it lists) and the worker
materializes it into its OWN cache, ``<cache>/<manifest_sha256>/``, checking every digest
against the manifest, and the manifest against the digest the run's log recorded, BEFORE
anything is written or built. A mismatch is refused with :class:`DeploymentDigestMismatch`
naming the file: the run fails (resumably) rather than collecting on assets it did not
prepare. A cached copy is re-validated on every use and rewritten when it no longer verifies.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from domain.canonical import sha256_hex
from domain.errors import DeploymentInvalid
from domain.paths import contained_relpath
from runtime.deployment import MANIFEST_NAME, Deployment, validate_deployment
from runtime.files import fsync_directory, write_files_fsynced


class DeploymentDigestMismatch(DeploymentInvalid):
    """Bytes a worker received for a deployment do not match their recorded digest."""


@dataclass(frozen=True)
class DeploymentPackage:
    """A deployment as bytes: what a worker needs to rebuild it anywhere."""

    batch_index: int
    manifest_sha256: str
    manifest: bytes
    files: dict[str, bytes]

    @property
    def size(self) -> int:
        return len(self.manifest) + sum(len(data) for data in self.files.values())


def pack_deployment(path: Path, manifest_sha256: str, batch_index: int) -> DeploymentPackage:
    """Read ``manifest.json`` and every file it lists (the driver checks nothing here: the
    worker verifies every byte it is given)."""
    root = Path(path)
    manifest = (root / MANIFEST_NAME).read_bytes()
    listed = json.loads(manifest.decode("utf-8")).get("files", {})
    files = {rel: (root / rel).read_bytes() for rel in sorted(listed)}
    return DeploymentPackage(batch_index, manifest_sha256, manifest, files)


def check_package(package: DeploymentPackage) -> dict[str, str]:
    """Every digest of ``package`` against its manifest (and the manifest against the log's
    digest); the manifest's file digests. Raises :class:`DeploymentDigestMismatch`."""
    where = f"deployment of batch {package.batch_index}"
    actual = sha256_hex(package.manifest)
    if actual != package.manifest_sha256:
        raise DeploymentDigestMismatch(
            f"{where}: {MANIFEST_NAME} has SHA-256 {actual}, the run recorded "
            f"{package.manifest_sha256}"
        )
    try:
        listed = json.loads(package.manifest.decode("utf-8"))["files"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        message = f"{where}: {MANIFEST_NAME} is not a manifest: {error}"
        raise DeploymentDigestMismatch(message) from error
    if not isinstance(listed, dict):
        raise DeploymentDigestMismatch(f"{where}: {MANIFEST_NAME} files is not an object")
    missing = sorted(set(listed) - set(package.files))
    extra = sorted(set(package.files) - set(listed))
    if missing or extra:
        name = (missing or extra)[0]
        what = "listed in the manifest but not received" if missing else "not in the manifest"
        raise DeploymentDigestMismatch(f"{where}: {name} is {what}")
    for rel in sorted(listed):
        contained_relpath(rel, where=f"{where}: {rel}", error=DeploymentDigestMismatch)
        digest = sha256_hex(package.files[rel])
        if digest != listed[rel]:
            raise DeploymentDigestMismatch(
                f"{where}: {rel} has SHA-256 {digest}, the manifest records {listed[rel]}"
            )
    return dict(listed)


def materialize_package(package: DeploymentPackage, cache_root: Path) -> Deployment:
    """The deployment in this worker's cache, verified; written (staged, fsynced, renamed)
    only after every received digest checked out."""
    check_package(package)
    cache_root = Path(cache_root)
    target = cache_root / package.manifest_sha256
    if target.is_dir():
        try:
            return validate_deployment(target, expected_manifest_sha256=package.manifest_sha256)
        except DeploymentInvalid:
            shutil.rmtree(target, ignore_errors=True)  # a damaged cache entry: write it anew
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{package.manifest_sha256[:16]}.", dir=cache_root))
    try:
        write_files_fsynced(
            staging, [(MANIFEST_NAME, package.manifest), *sorted(package.files.items())]
        )
        try:
            os.rename(staging, target)
        except OSError:  # another worker of this machine published it first
            if not target.is_dir():
                raise
            shutil.rmtree(staging, ignore_errors=True)
        fsync_directory(cache_root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return validate_deployment(target, expected_manifest_sha256=package.manifest_sha256)
