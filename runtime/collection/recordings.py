"""Trajectory files on disk versus what the log claims.

Paths in `TrajectoryCommitted` are relative to the run's output directory
(``recordings/run_<session_id>/bNNNN_eNNNN.pt``), so a run directory can be moved as a whole.

An episode's camera files (``TrajectoryCommitted.files``, see ``runtime.sim.cameras.storage``)
are held to exactly the same rules as its trajectory: each one is part of the commit.

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


def committed_files(receipt: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(what, receipt)`` for the trajectory and every camera file of one commit."""
    files: list[tuple[str, Mapping[str, Any]]] = [("trajectory", receipt)]
    for entry in receipt.get("files") or ():
        camera = entry.get("camera")
        what = f"{camera} {entry.get('modality')}" if camera else str(entry.get("modality"))
        files.append((f"camera file ({what})", entry))
    return files


def file_problem(path: Path, receipt: Mapping[str, Any]) -> str | None:
    """Why ``path`` does not match its receipt (size, then SHA-256), or None."""
    if not path.is_file():
        return "is missing"
    size = path.stat().st_size
    if size != int(receipt["bytes"]):
        return f"has {size} bytes, the log recorded {receipt['bytes']}"
    actual = file_sha256(path)
    if actual != receipt["sha256"]:
        return f"has SHA-256 {actual}, the log recorded {receipt['sha256']}"
    return None


def verify_committed(
    run_id: str, output_dir: Path, committed: Mapping[tuple[int, int], Mapping[str, Any]]
) -> None:
    """Check every committed file's size and SHA-256 (trajectories and camera files alike);
    raise on the first mismatch."""
    for (batch_index, episode_index), receipt in sorted(committed.items()):
        for what, entry in committed_files(receipt):
            path = from_log_path(output_dir, str(entry["path"]))
            problem = file_problem(path, entry)
            if problem is None:
                continue
            where = f"run {run_id}: committed {what} {path} (batch {batch_index}, episode "
            where += f"{episode_index})"
            if problem == "is missing":
                problem += "; the dataset is damaged"
            raise CommittedTrajectoryMissing(f"{where} {problem}")


def unlogged_recordings(
    run_id: str, output_dir: Path, committed: Mapping[tuple[int, int], Mapping[str, Any]]
) -> tuple[Path, ...]:
    """Files under ``recordings/`` that no `TrajectoryCommitted` names."""
    root = output_dir / RECORDINGS_DIR
    if not root.is_dir():
        return ()
    known = {
        from_log_path(output_dir, str(entry["path"])).resolve()
        for receipt in committed.values()
        for _what, entry in committed_files(receipt)
    }
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
