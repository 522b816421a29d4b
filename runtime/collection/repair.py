"""``resume --repair``: determinism pays for lost files.

A committed episode's files are fixed by its deployment and seed, so an episode whose
trajectory or camera file is missing or corrupt can be run again and its files rebuilt.
Nothing is taken on trust: the re-run's files must have exactly the SHA-256 (and size)
its `TrajectoryCommitted` recorded, every one of them, or nothing is restored and the
repair stops naming the episode (`RepairRefused`): a file that differs is not the episode
the log vouches for (the deployment, an asset, the simulator or a plugin changed).

Restored files are written like the originals (temp -> fsync -> fence check -> rename ->
directory fsync) under the run's lease. The log is not touched: it already names these
exact bytes.
"""

from __future__ import annotations

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
from runtime.collection.recordings import committed_files, file_problem, from_log_path
from runtime.files import write_bytes_atomic

log = structlog.get_logger(__name__)


class RepairRefused(AssetcastInputError):
    """A re-run episode's files differ from what the log recorded; nothing was restored."""


@dataclass(frozen=True)
class RestoredEpisode:
    batch_index: int
    episode_index: int
    paths: tuple[Path, ...]  # the files written back (the damaged ones only)


def damaged(plan: CollectionPlan) -> dict[tuple[int, int], list[tuple[Mapping[str, Any], Path]]]:
    """Committed episodes with a missing or corrupt file: (receipt entry, path) per file."""
    found: dict[tuple[int, int], list[tuple[Mapping[str, Any], Path]]] = {}
    for key, receipt in sorted(plan.committed().items()):
        for _what, entry in committed_files(receipt):
            path = from_log_path(plan.output_dir, str(entry["path"]))
            if file_problem(path, entry) is not None:
                found.setdefault(key, []).append((entry, path))
    return found


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


def repair_committed(
    plan: CollectionPlan,
    *,
    fence: Any,
    environment_factory: EnvironmentFactory | None = None,
) -> tuple[RestoredEpisode, ...]:
    """Re-run every damaged committed episode of ``plan`` and restore its damaged files."""
    broken = damaged(plan)
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
    restored = []
    opened: int | None = None
    try:
        for key, entries in broken.items():
            b, j = key
            if opened != b:
                batch = batches[b]
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
            for _entry, path in entries:
                write_bytes_atomic(path, regenerated[path.name], fence=fence)
                log.warning(
                    "committed_file_restored", run_id=plan.run_id, batch_index=b,
                    episode_index=j, path=str(path),
                )
            restored.append(RestoredEpisode(b, j, tuple(path for _entry, path in entries)))
    finally:
        worker.close()
    return tuple(restored)
