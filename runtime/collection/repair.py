"""``resume --repair``: determinism pays for lost files.

A committed episode's files are fixed by its deployment and seed, so an episode whose
trajectory or camera file is missing or corrupt can be run again and its files rebuilt.
Nothing is taken on trust: the re-run's files must have exactly the SHA-256 (and size)
its `TrajectoryCommitted` recorded, every one of them, or nothing is restored and the
repair stops naming the episode (`RepairRefused`): a file that differs is not the episode
the log vouches for (the deployment, an asset, the simulator or a plugin changed).

All or nothing: every damaged episode is re-run and checked, its files staged next to
their targets (fsynced), and only then are they renamed into place (fence check, rename,
directory fsync) under the run's lease. What was done is then recorded as one
`CommittedFilesRepaired` event (:func:`repair_event`): which files, what was found in their
place, and what they were rebuilt from; the event only names bytes the log already vouched
for, so the fold checks them against the episode's receipt.

Which files are damaged is :mod:`runtime.collection.repair_scan`; the repair as a session
(lease, event) is :mod:`runtime.collection.repair_session`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from domain.canonical import sha256_hex
from domain.errors import AssetcastInputError
from runtime.collection.environment import EnvironmentFactory, default_environment_factory
from runtime.collection.executors.base import BatchWork, WorkSettings
from runtime.collection.executors.worker import BatchWorker
from runtime.collection.plan import CollectionPlan
from runtime.collection.recordings import committed_files
from runtime.collection.repair_scan import RepairScan, scan_committed
from runtime.files import fsync_directory, temp_name

log = structlog.get_logger(__name__)

REPAIR_EVENT = "CommittedFilesRepaired"


class RepairRefused(AssetcastInputError):
    """A re-run episode's files differ from what the log recorded; nothing was restored."""


@dataclass(frozen=True)
class RestoredFile:
    what: str
    path: Path
    logged_path: str
    bytes: int
    sha256: str
    found: tuple[int, str] | None


@dataclass(frozen=True)
class RestoredEpisode:
    batch_index: int
    episode_index: int
    paths: tuple[Path, ...]  # the files written back (the damaged ones only)
    seed: int = 0  # the episode's seed, which the re-run used
    deployment_path: str = ""  # the batch's deployment the episode was re-run on
    manifest_sha256: str = ""
    files: tuple[RestoredFile, ...] = ()


def _regenerated(run: Any) -> dict[str, bytes]:
    """File name -> bytes of a re-run episode (trajectory first, then camera files)."""
    from runtime.collection.recordings import episode_file_name

    files = run.files
    named = {episode_file_name(run.batch_index, run.episode_index): files.trajectory}
    for _camera, _modality, name, data in files.cameras:
        named[name] = data
    return named


def _check(run_id: str, key: tuple[int, int], receipt: Mapping[str, Any], run: Any) -> None:
    where = f"run {run_id}: batch {key[0]} episode {key[1]}"
    if run.files is None:
        raise RepairRefused(
            f"{where}: the re-run was not accepted ({run.discard_reason}), but the log "
            "committed it; nothing restored"
        )
    regenerated = _regenerated(run)
    for what, entry in committed_files(receipt):
        name = Path(str(entry["path"])).name
        data = regenerated.get(name)
        if data is None:
            raise RepairRefused(f"{where}: the re-run wrote no {what} {name}; nothing restored")
        digest = sha256_hex(data)
        if digest != entry["sha256"] or len(data) != int(entry["bytes"]):
            raise RepairRefused(
                f"{where}: the regenerated {what} {name} has SHA-256 {digest}, the log "
                f"recorded {entry['sha256']}; nothing restored"
            )


def _episode_seed(run: Any) -> int:
    return int(next(p["seed"] for kind, p in run.events if kind == "EpisodeStarted"))


class _Staging:
    """Restored bytes written and fsynced next to their targets, renamed only when every
    damaged episode has been checked; dropped (nothing restored) otherwise."""

    def __init__(self, fence: Any) -> None:
        self.fence = fence
        self.staged: list[tuple[Path, Path]] = []  # (temporary, target)

    def stage(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(
            prefix=temp_name(f".{path.name}.", self.fence), suffix=".tmp", dir=path.parent
        )
        self.staged.append((Path(temporary), path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def publish(self) -> None:
        self.fence.check()
        for temporary, target in self.staged:
            os.replace(temporary, target)
        for directory in sorted({target.parent for _temporary, target in self.staged}):
            fsync_directory(directory)
        self.staged = []

    def drop(self) -> None:
        for temporary, _target in self.staged:
            temporary.unlink(missing_ok=True)
        self.staged = []


def repair_committed(
    plan: CollectionPlan,
    *,
    fence: Any,
    environment_factory: EnvironmentFactory | None = None,
    scan: RepairScan | None = None,
) -> tuple[RestoredEpisode, ...]:
    """Re-run every damaged committed episode of ``plan`` and restore its damaged files
    (all episodes or none). ``scan`` is :func:`scan_committed`'s result if the caller has it."""
    broken = (scan or scan_committed(plan)).damaged
    if not broken:
        return ()
    settings = WorkSettings(
        factory=environment_factory or default_environment_factory,
        settle_steps=plan.settle_steps,
        record=True,
        initial_checks=None,
        final_checks=None,
        run_id=plan.run_id,
    )
    batches = {batch.batch_index: batch for batch in plan.batches}
    committed = plan.committed()
    worker = BatchWorker(settings, name="repair")
    staging = _Staging(fence)
    restored = []
    opened: int | None = None
    try:
        for key, damages in broken.items():
            b, j = key
            batch = batches[b]
            if opened != b:
                worker.open(
                    BatchWork(
                        batch_index=b,
                        asset_set_id=batch.asset_set_id,
                        seed=batch.seed,
                        deployment_path=batch.deployment_path,
                        manifest_sha256=batch.manifest_sha256,
                        episodes=(j,),
                    )
                )
                opened = b
            run = worker.episode(b, j)
            _check(plan.run_id, key, committed[key], run)
            regenerated = _regenerated(run)
            for damage in damages:
                staging.stage(damage.path, regenerated[damage.path.name])
            files = tuple(
                RestoredFile(
                    d.what, d.path, str(d.entry["path"]), int(d.entry["bytes"]),
                    str(d.entry["sha256"]), d.found,
                )
                for d in damages
            )
            restored.append(
                RestoredEpisode(
                    b, j, tuple(d.path for d in damages), seed=_episode_seed(run),
                    deployment_path=str(batch.deployment_path),
                    manifest_sha256=batch.manifest_sha256, files=files,
                )
            )
        staging.publish()
    finally:
        staging.drop()
        worker.close()
    for episode in restored:
        for path in episode.paths:
            log.warning(
                "committed_file_restored", run_id=plan.run_id, batch_index=episode.batch_index,
                episode_index=episode.episode_index, path=str(path),
            )
    return tuple(restored)


def repair_event(
    identity: Mapping[str, Any], restored: tuple[RestoredEpisode, ...]
) -> tuple[str, dict[str, Any]]:
    """`CommittedFilesRepaired`: the session that repaired (``identity``) and, per episode,
    what it was rebuilt from and which files were restored over what was found."""
    return (
        REPAIR_EVENT,
        {
            **identity,
            "episodes": [
                {
                    "batch_index": episode.batch_index,
                    "episode_index": episode.episode_index,
                    "seed": episode.seed,
                    "deployment_path": episode.deployment_path,
                    "manifest_sha256": episode.manifest_sha256,
                    "files": [
                        {
                            "what": f.what,
                            "path": f.logged_path,
                            "bytes": f.bytes,
                            "sha256": f.sha256,
                            "found": (
                                None if f.found is None
                                else {"bytes": f.found[0], "sha256": f.found[1]}
                            ),
                        }
                        for f in episode.files
                    ],
                }
                for episode in restored
            ],
        },
    )
