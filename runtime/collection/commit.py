"""The driver's half of an episode: its files made durable, then its complete event list.

Workers never write into the run's output directory. The driver, the only process holding
the run's lease, receives an episode's bytes (from this process or through Ray's object
store), writes every camera file and then the trajectory (temp -> fsync -> fence check ->
rename -> directory fsync), and only then builds the `TrajectoryCommitted` receipt (path,
bytes, SHA-256 of exactly those bytes) that goes into the log with the episode's other
events. A lost lease stops the write before any rename, so a stale driver publishes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from domain.canonical import sha256_hex
from runtime.collection.episode import EpisodeRun, Events
from runtime.collection.recordings import episode_file_name, to_log_path
from runtime.files import write_bytes_atomic


def write_committed_files(
    run: EpisodeRun, *, output_dir: Path, recording_dir: Path, fence: Any
) -> dict[str, Any]:
    """Write ``run``'s camera files and trajectory durably; the `TrajectoryCommitted` payload."""
    from runtime.sim.cameras.storage import write_episode_files

    assert run.files is not None
    started = time.perf_counter()
    b, j = run.batch_index, run.episode_index
    camera_receipts: list[dict[str, Any]] = []
    if run.files.cameras:
        camera_receipts = write_episode_files(
            run.files.cameras,
            recording_dir,
            log_path=lambda path: to_log_path(output_dir, path),
            fence=fence,
        )
    data = run.files.trajectory
    target = recording_dir / episode_file_name(b, j)
    write_bytes_atomic(target, data, fence=fence)
    duration = run.files.encode_s + (time.perf_counter() - started)
    return {
        "batch_index": b,
        "episode_index": j,
        "path": to_log_path(output_dir, target),
        "bytes": len(data),
        "sha256": sha256_hex(data),
        "files": camera_receipts,
        "duration_s": round(duration, 6),
    }


def write_kept_files(
    run: EpisodeRun, *, output_dir: Path, rejected_dir: Path, fence: Any
) -> list[dict[str, Any]]:
    """``--keep-rejected``: a rejected episode's trajectory and camera files, written like a
    commit's (temp -> fsync -> fence check -> rename -> directory fsync) under ``rejected/``;
    their receipts (the trajectory's with modality ``trajectory``) for `TrajectoryDiscarded`."""
    from runtime.sim.cameras.storage import write_episode_files

    files = run.rejected_files
    assert files is not None
    receipts: list[dict[str, Any]] = []
    if files.cameras:
        receipts = write_episode_files(
            files.cameras, rejected_dir, log_path=lambda path: to_log_path(output_dir, path),
            fence=fence,
        )
    target = rejected_dir / episode_file_name(run.batch_index, run.episode_index)
    write_bytes_atomic(target, files.trajectory, fence=fence)
    trajectory = {
        "camera": None,
        "modality": "trajectory",
        "path": to_log_path(output_dir, target),
        "bytes": len(files.trajectory),
        "sha256": sha256_hex(files.trajectory),
    }
    return [trajectory, *receipts]


def episode_events(
    run: EpisodeRun,
    *,
    output_dir: Path,
    recording_dir: Path | None,
    fence: Any,
    rejected_dir: Path | None = None,
) -> tuple[Events, dict[str, Any] | None]:
    """Every event of a done episode, in grammar order, with its files already durable;
    and the commit receipt (without ``duration_s``) when one was made. With
    ``rejected_dir``, a rejected episode's recorded files are kept there and listed in its
    `TrajectoryDiscarded` (``kept``)."""
    b, j = run.batch_index, run.episode_index
    events: Events = list(run.events)
    committed: dict[str, Any] | None = None
    if run.files is not None and recording_dir is not None:
        payload = write_committed_files(
            run, output_dir=output_dir, recording_dir=recording_dir, fence=fence
        )
        events.append(("TrajectoryCommitted", payload))
        committed = {k: v for k, v in payload.items() if k != "duration_s"}
    else:
        reason = run.discard_reason or "recording_disabled"
        discarded: dict[str, Any] = {"batch_index": b, "episode_index": j, "reason": reason}
        if run.rejected_files is not None and rejected_dir is not None:
            discarded["kept"] = write_kept_files(
                run, output_dir=output_dir, rejected_dir=rejected_dir, fence=fence
            )
        events.append(("TrajectoryDiscarded", discarded))
    if run.reset_error is None:
        events.append(
            ("ResetSubmitted", {"batch_index": b, "episode_index": j, "duration_s": run.reset_s})
        )
    return events, committed
