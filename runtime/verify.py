"""Check that the log is sound and that the files on disk still match what it says.

The log itself is checked first: it must fold legally (the same machine the store uses),
and every `TrajectoryCommitted` must name its own episode's file (``bNNNN_eNNNN.pt`` in the
recording folder of the session that committed it) and a file no other receipt names -- so
a forged or mistaken receipt pointing at another episode's trajectory is a problem, and no
file is ever counted twice. Then every committed trajectory (SHA-256 and size) and every
deployment (manifest digest) is re-hashed, so a truncated, edited or deleted file is found
before anyone trains on it. Problems are collected, not raised: the point is a complete
list of what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from domain.errors import AssetcastError
from domain.state import Folder
from runtime.collection.recordings import committed_files, episode_file_name
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


def _fold_problems(run_id: str, events: Sequence[EventLike]) -> list[str]:
    """The log must replay through the run's state machine, as the store replays it."""
    folder = Folder(str(getattr(events[0], "run_id", run_id)) if events else run_id)
    for event in events:
        try:
            folder.apply(event.seq, event.type, dict(event.payload))
        except Exception as error:  # noqa: BLE001 - any refusal is the finding
            return [f"log: seq {event.seq} {event.type} does not fold: {error}"]
    return []


def _receipt_problems(
    events: Sequence[EventLike], output_dir: str | None
) -> tuple[list[str], dict[Path, Mapping[str, Any]]]:
    """Each receipt names its own episode's file, in its session's folder, and no other
    receipt's file. Returns the problems and the distinct files to re-hash (first receipt
    naming each)."""
    problems: list[str] = []
    files: dict[Path, Mapping[str, Any]] = {}
    recording_dir: str | None = None
    for event in events:
        payload = event.payload
        if event.type == "CollectionStarted":
            recording_dir = payload.get("recording_dir")
            continue
        if event.type != "TrajectoryCommitted":
            continue
        b, j = int(payload["batch_index"]), int(payload["episode_index"])
        where = f"batch {b} episode {j}"
        logged = str(payload["path"])
        expected = episode_file_name(b, j)
        if Path(logged).name != expected:
            problems.append(
                f"{where}: committed path {logged} is not this episode's file ({expected})"
            )
        elif recording_dir is None or Path(logged).parent != Path(recording_dir):
            problems.append(
                f"{where}: committed path {logged} is outside the recording folder "
                f"{recording_dir} of the session that committed it"
            )
        path = resolve_recorded_path(logged, output_dir)
        key = Path(path).resolve()
        first = files.get(key)
        if first is not None:
            problems.append(
                f"{where}: committed path {logged} is already the trajectory of batch "
                f"{first['batch_index']} episode {first['episode_index']}"
            )
            continue
        files[key] = payload
    return problems, files


def _check_file(what: str, entry: Mapping[str, Any], output_dir: str | None) -> str | None:
    path = resolve_recorded_path(str(entry["path"]), output_dir)
    if not path.is_file():
        return f"{what} {path} is missing"
    size = path.stat().st_size
    if size != int(entry["bytes"]):
        return f"{what} {path} has {size} bytes, the log says {entry['bytes']}"
    actual = file_sha256(path)
    if actual != entry["sha256"]:
        return f"{what} {path} sha256 {actual} != logged {entry['sha256']}"
    return None


def _check_trajectory(receipt: Mapping[str, Any], output_dir: str | None) -> list[str]:
    """Problems of one commit: its trajectory and every camera file it lists (each named
    after its episode, beside the trajectory)."""
    b, j = int(receipt["batch_index"]), int(receipt["episode_index"])
    where = f"batch {b} episode {j}"
    stem = episode_file_name(b, j).removesuffix(".pt")
    folder = Path(str(receipt["path"])).parent
    problems = []
    for what, entry in committed_files(receipt):
        logged = Path(str(entry["path"]))
        if entry is not receipt and (logged.parent != folder or not logged.name.startswith(
            f"{stem}."
        )):
            problems.append(f"{where}: {what} {logged} is not beside this episode's trajectory")
            continue
        problem = _check_file(what, entry, output_dir)
        if problem is not None:
            problems.append(f"{where}: {problem}")
    return problems


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


def preparation_prefix(events: Iterable[EventLike]) -> list[EventLike]:
    """The events before the run's first ``CollectionStarted``: every event that names a
    deployment or a cache snapshot (preparation's events are legal only while preparing,
    which ends for good when collection starts). Streamed, so a long collection's history
    is never read for what resume checks before it starts."""
    prefix = []
    for event in events:
        if event.type == "CollectionStarted":
            break
        prefix.append(event)
    return prefix


def verify_events(
    run_id: str,
    events: Sequence[EventLike],
    *,
    validate_deployment: Callable[..., Any] | None = None,
    trajectories: bool = True,
) -> VerifyResult:
    """Check the log itself, then every committed trajectory (unless ``trajectories`` is
    False), every deployment and every cache snapshot it names."""
    if validate_deployment is None:
        from runtime.deployment import validate_deployment
    result = VerifyResult(run_id=run_id)
    result.problems.extend(_fold_problems(run_id, events))
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
    if not trajectories:
        log.info("run_inputs_verified", run_id=run_id, problems=len(result.problems))
        return result
    receipt_problems, files = _receipt_problems(events, output_dir)
    result.problems.extend(receipt_problems)
    counted = {id(receipt) for receipt in files.values()}
    for _key, receipt in sorted(_committed(events).items()):
        if id(receipt) not in counted:
            continue  # its file is another receipt's; reported above, never counted twice
        result.trajectories_checked += 1
        result.problems.extend(_check_trajectory(receipt, output_dir))
    log.info(
        "run_verified",
        run_id=run_id,
        trajectories=result.trajectories_checked,
        deployments=result.deployments_checked,
        snapshots=result.snapshots_checked,
        problems=len(result.problems),
    )
    return result
