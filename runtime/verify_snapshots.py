"""Check the run's cache snapshots against the digests its hash-chained log carries.

Why: ``CandidatePrepared.content_sha256`` (in the chain) pins a snapshot's descriptor and
package files, and every deployment's manifest (pinned by ``manifest_sha256``, in the
chain) lists the digest of every file of each snapshot it copied, derived collision
pieces and ``snapshot.json`` included. Checking the cache against both means one head hash
covers the cache too: an edit anywhere in ``cache/<sha>/`` is named here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from domain.canonical import sha256_hex
from domain.errors import AssetcastError
from runtime.files import file_sha256
from store.projections.audit import EventLike


def _resolve(recorded: str, output_dir: str | None) -> Path:
    path = Path(recorded)
    if path.is_absolute() or output_dir is None:
        return path
    return Path(output_dir) / path


def _deployed_digests(
    events: Sequence[EventLike], output_dir: str | None
) -> dict[str, dict[str, str]]:
    """``{content_sha256: {relpath in the snapshot: sha256}}`` from every deployment manifest
    whose bytes still match the chained ``manifest_sha256`` (others are reported by the
    deployment check)."""
    out: dict[str, dict[str, str]] = {}
    for event in events:
        if event.type != "DeploymentMaterialized":
            continue
        folder = _resolve(str(event.payload["deployment_path"]), output_dir)
        manifest_path = folder / "manifest.json"
        try:
            data = manifest_path.read_bytes()
        except OSError:
            continue
        if sha256_hex(data) != event.payload["manifest_sha256"]:
            continue
        files = json.loads(data).get("files", {})
        for rel, digest in files.items():
            parts = rel.split("/", 2)
            if len(parts) == 3 and parts[0] == "assets":
                out.setdefault(parts[1], {})[parts[2]] = digest
    return out


def _check_one(
    sha: str, folder: Path, deployed: Mapping[str, str] | None
) -> str | None:
    from runtime.assets.snapshot import (
        SNAPSHOT_RELPATH,
        read_snapshot,
        snapshot_bytes,
        verify_prepared_asset,
    )

    where = f"cache snapshot {sha[:12]}"
    if not folder.is_dir():
        return f"{where}: {folder} is missing"
    try:
        asset = read_snapshot(folder)
        if asset.content_sha256 != sha:
            return f"{where}: snapshot.json says content_sha256 {asset.content_sha256}"
        verify_prepared_asset(asset)
    except AssetcastError as error:
        return f"{where}: {error}"
    # A file verify_prepared_asset just hashed against the very digest the deployment
    # records (or snapshot.json, compared byte for byte with the asset it describes) is
    # not read a second time.
    verified = {**asset.files, **asset.derived_files}
    verified[SNAPSHOT_RELPATH] = sha256_hex(snapshot_bytes(asset))
    for rel, digest in sorted((deployed or {}).items()):
        path = folder / rel
        if verified.get(rel) == digest:
            continue
        if not path.is_file():
            return f"{where}: {path} is missing (its deployment copy is in the log)"
        if file_sha256(path) != digest:
            return f"{where}: {path} differs from the copy its deployment manifest records"
    return None


def check_snapshots(
    events: Sequence[EventLike], output_dir: str | None
) -> tuple[int, list[str]]:
    """``(snapshots checked, problems)`` for every snapshot a ``CandidatePrepared`` names."""
    snapshots: dict[str, Path] = {}
    for event in events:
        if event.type == "CandidatePrepared":
            p: Mapping[str, Any] = event.payload
            snapshots.setdefault(
                str(p["content_sha256"]), _resolve(str(p["snapshot_dir"]), output_dir)
            )
    deployed = _deployed_digests(events, output_dir)
    problems = [
        problem
        for sha, folder in sorted(snapshots.items())
        if (problem := _check_one(sha, folder, deployed.get(sha))) is not None
    ]
    return len(snapshots), problems
