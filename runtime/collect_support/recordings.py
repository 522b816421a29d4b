"""Trajectory files on disk versus what the log claims.

Paths in `TrajectoryCommitted` are relative to the run's output directory
(``recordings/run_<session_id>/bNNNN_eNNNN.pt``), so a run directory can be moved as a whole.

Two different disagreements, two different answers:

* a file the log says was committed is missing or has other bytes: the dataset is damaged.
  Resume refuses (:class:`CommittedTrajectoryMissing`); silently re-collecting would hide
  the loss and could produce a different trajectory under the same receipt.
* a file the log does not know (written, then the process died before the episode's events
  were appended; or a temporary file of a session that died or was taken over): harmless,
  but it must not look like data. The session that took the lease moves it to
  ``quarantine/<session_id>/`` (same relative path), so whatever reads ``recordings/**``
  sees only logged trajectories; the episode is re-run into the new session's folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from domain.errors import AssetcastInputError
from runtime.files import file_sha256, fsync_directory

log = structlog.get_logger(__name__)

RECORDINGS_DIR = "recordings"
QUARANTINE_DIR = "quarantine"


class CommittedTrajectoryMissing(AssetcastInputError):
    """A trajectory the log records as committed is missing or does not match its receipt."""


def session_recording_dir(output_dir: Path, session_id: str) -> Path:
    return output_dir / RECORDINGS_DIR / f"run_{session_id}"


def episode_file_name(batch_index: int, episode_index: int) -> str:
    return f"b{batch_index:04d}_e{episode_index:04d}.pt"


def to_log_path(output_dir: Path, path: Path) -> str:
    """The path as written into the log: relative to the output dir when inside it."""
    try:
        return Path(path).resolve().relative_to(output_dir.resolve()).as_posix()
    except ValueError:
        return str(Path(path).resolve())


def from_log_path(output_dir: Path, logged: str) -> Path:
    path = Path(logged)
    return path if path.is_absolute() else output_dir / path


def verify_committed(
    run_id: str, output_dir: Path, committed: Mapping[tuple[int, int], Mapping[str, Any]]
) -> None:
    """Check every committed trajectory's size and SHA-256; raise on the first mismatch."""
    for (batch_index, episode_index), receipt in sorted(committed.items()):
        path = from_log_path(output_dir, str(receipt["path"]))
        where = f"run {run_id}: committed trajectory {path} (batch {batch_index}, episode "
        where += f"{episode_index})"
        if not path.is_file():
            raise CommittedTrajectoryMissing(f"{where} is missing; the dataset is damaged")
        size = path.stat().st_size
        if size != int(receipt["bytes"]):
            raise CommittedTrajectoryMissing(
                f"{where} has {size} bytes, the log recorded {receipt['bytes']}"
            )
        actual = file_sha256(path)
        if actual != receipt["sha256"]:
            raise CommittedTrajectoryMissing(
                f"{where} has SHA-256 {actual}, the log recorded {receipt['sha256']}"
            )


def unlogged_recordings(
    run_id: str, output_dir: Path, committed: Mapping[tuple[int, int], Mapping[str, Any]]
) -> tuple[Path, ...]:
    """Files under ``recordings/`` that no `TrajectoryCommitted` names."""
    root = output_dir / RECORDINGS_DIR
    if not root.is_dir():
        return ()
    known = {from_log_path(output_dir, str(r["path"])).resolve() for r in committed.values()}
    return tuple(
        sorted(
            p for p in root.rglob("*")
            if (p.is_file() or p.is_symlink()) and p.resolve() not in known
        )
    )


def quarantine_unlogged(
    run_id: str, output_dir: Path, committed: Mapping[tuple[int, int], Mapping[str, Any]],
    session_id: str,
) -> tuple[Path, ...]:
    """Move every unlogged file out of ``recordings/`` into ``quarantine/<session_id>/``.

    Called by the session that holds the run's lease, before it records anything: a writer
    of such a file is dead or fenced (it can never log it). Returns the original paths.
    """
    strays = unlogged_recordings(run_id, output_dir, committed)
    target_root = output_dir / QUARANTINE_DIR / session_id
    touched: set[Path] = set()
    for path in strays:
        target = target_root / path.relative_to(output_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(path, target)
        except FileNotFoundError:  # a fenced writer's temporary file vanished meanwhile
            continue
        touched.update((path.parent, target.parent))
        log.warning(
            "unlogged_recording_quarantined",
            run_id=run_id,
            path=str(path),
            moved_to=str(target),
            reason="on disk but never logged (a crash or a fenced session); the episode is "
            "re-run",
        )
    for directory in sorted(touched):
        fsync_directory(directory)
    return strays
