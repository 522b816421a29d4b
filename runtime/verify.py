"""Check that the files on disk still match what the ledger says was written.

The log records the SHA-256 and size of every committed trajectory and the manifest digest
of every deployment. ``verify`` re-hashes each of them, so a truncated, edited or deleted
file is found before anyone trains on it. Problems are collected, not raised: the point is
a complete list of what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from domain.errors import AssetcastError
from runtime.files import file_sha256
from store.projections.audit import EventLike

log = structlog.get_logger(__name__)



@dataclass
class VerifyResult:
    run_id: str
    trajectories_checked: int = 0
    deployments_checked: int = 0
    snapshots_checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def resolve_recorded_path(recorded: str, output_dir: str | None) -> Path:
    """Paths in the log are absolute, or relative to the run's output directory."""
    path = Path(recorded)
    if path.is_absolute() or output_dir is None:
        return path
    candidate = Path(output_dir) / path
    return candidate if candidate.exists() or not path.exists() else path


def _committed(events: Sequence[EventLike]) -> dict[tuple[int, int], Mapping[str, Any]]:
    """The receipt that stands for each episode (a re-run after a crash supersedes)."""
    receipts: dict[tuple[int, int], Mapping[str, Any]] = {}
    for event in events:
        if event.type == "TrajectoryCommitted":
            p = event.payload
            receipts[(int(p["batch_index"]), int(p["episode_index"]))] = p
    return receipts


def _check_trajectory(receipt: Mapping[str, Any], output_dir: str | None) -> str | None:
    where = f"batch {receipt['batch_index']} episode {receipt['episode_index']}"
    path = resolve_recorded_path(str(receipt["path"]), output_dir)
    if not path.is_file():
        return f"{where}: trajectory {path} is missing"
    size = path.stat().st_size
    if size != int(receipt["bytes"]):
        return f"{where}: trajectory {path} has {size} bytes, the log says {receipt['bytes']}"
    actual = file_sha256(path)
    if actual != receipt["sha256"]:
        return f"{where}: trajectory {path} sha256 {actual} != logged {receipt['sha256']}"
    return None


def _check_deployment(
    materialized: Mapping[str, Any],
    resolved: Mapping[str, Any] | None,
    output_dir: str | None,
    validate: Callable[..., Any],
) -> list[str]:
    where = f"batch {materialized['batch_index']}"
    path = resolve_recorded_path(str(materialized["deployment_path"]), output_dir)
    if not path.is_dir():
        return [f"{where}: deployment {path} is missing"]
    try:
        # The logged manifest digest pins the manifest, which pins every file's digest.
        deployment = validate(path, expected_manifest_sha256=str(materialized["manifest_sha256"]))
    except AssetcastError as error:
        return [f"{where}: {error}"]
    problems = []
    if deployment.asset_set_id != materialized["asset_set_id"]:
        problems.append(
            f"{where}: deployment asset set {deployment.asset_set_id} "
            f"!= logged {materialized['asset_set_id']}"
        )
    if resolved is not None:
        roles = deployment.manifest.get("roles", {})
        for role, asset in resolved["assets"].items():
            got = roles.get(role, {})
            if got.get("content_sha256") != asset["content_sha256"]:
                problems.append(
                    f"{where}: role {role} holds {got.get('content_sha256')} "
                    f"but the log resolved {asset['content_sha256']}"
                )
    return problems


def verify_events(
    run_id: str,
    events: Sequence[EventLike],
    *,
    validate_deployment: Callable[..., Any] | None = None,
    trajectories: bool = True,
) -> VerifyResult:
    """Check every committed trajectory (unless ``trajectories`` is False), every
    deployment and every cache snapshot named in ``events``."""
    if validate_deployment is None:
        from runtime.deployment import validate_deployment
    result = VerifyResult(run_id=run_id)
    created = next((e.payload for e in events if e.type == "RunCreated"), {})
    output_dir = created.get("output_dir")
    resolved = {
        int(e.payload["batch_index"]): e.payload for e in events if e.type == "BatchResolved"
    }
    materialized = {
        int(e.payload["batch_index"]): e.payload
        for e in events
        if e.type == "DeploymentMaterialized"
    }
    for index in sorted(materialized):
        result.deployments_checked += 1
        result.problems.extend(
            _check_deployment(
                materialized[index], resolved.get(index), output_dir, validate_deployment
            )
        )
    from runtime.verify_snapshots import check_snapshots

    result.snapshots_checked, snapshot_problems = check_snapshots(events, output_dir)
    result.problems.extend(snapshot_problems)
    for _key, receipt in sorted(_committed(events).items()) if trajectories else ():
        result.trajectories_checked += 1
        problem = _check_trajectory(receipt, output_dir)
        if problem:
            result.problems.append(problem)
    log.info(
        "run_verified",
        run_id=run_id,
        trajectories=result.trajectories_checked,
        deployments=result.deployments_checked,
        snapshots=result.snapshots_checked,
        problems=len(result.problems),
    )
    return result
