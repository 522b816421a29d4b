"""Naming and committing the camera files of one episode, beside its trajectory.

For episode ``bNNNN_eNNNN`` in a session's recording folder:

* ``bNNNN_eNNNN.<camera>.rgb.mp4``           H.264 video
* ``bNNNN_eNNNN.<camera>.depth.npz``         uint16 millimetres + frame index arrays
* ``bNNNN_eNNNN.<camera>.segmentation.npz``  label ids + label names + frame index arrays
* ``bNNNN_eNNNN.cameras.json``               intrinsics, per-frame poses, labels, file names

Each is written temp -> fsync -> rename -> directory fsync before the episode's events are
appended, and each gets a receipt (``camera``, ``modality``, ``path``, ``bytes``, ``sha256``)
in ``TrajectoryCommitted.files``; the metadata file has ``camera: null, modality:
"metadata"``. A write that fails (a full disk) raises before any event: the episode is not
committed, and whatever reached the disk is an unlogged file that resume ignores.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from domain.canonical import sha256_hex
from runtime.files import fsync_directory, temp_name
from runtime.sim.cameras.encoding import (
    encode_depth_npz,
    encode_rgb_mp4,
    encode_segmentation_npz,
    metadata_bytes,
)
from runtime.sim.cameras.recorder import CameraRecording, FrameRecorder

METADATA_MODALITY = "metadata"
EXTENSIONS = {"rgb": "mp4", "depth": "npz", "segmentation": "npz"}
METADATA_SCHEMA_VERSION = 1
DEPTH_UNIT_M = 0.001


def episode_stem(batch_index: int, episode_index: int) -> str:
    return f"b{batch_index:04d}_e{episode_index:04d}"


def camera_file_name(batch_index: int, episode_index: int, camera: str, modality: str) -> str:
    stem = episode_stem(batch_index, episode_index)
    return f"{stem}.{camera}.{modality}.{EXTENSIONS[modality]}"


def metadata_file_name(batch_index: int, episode_index: int) -> str:
    return f"{episode_stem(batch_index, episode_index)}.cameras.json"


def intrinsics(width: int, height: int, fovy_deg: float) -> dict[str, float]:
    """Pinhole intrinsics in pixels (square pixels, principal point at the image centre)."""
    focal = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
    return {"fx": focal, "fy": focal, "cx": width / 2.0, "cy": height / 2.0}


def _encode(recording: CameraRecording, modality: str, names: tuple[str, ...]) -> bytes:
    if modality in recording.encoded:  # encoded while the episode ran
        return recording.encoded[modality]
    camera = recording.camera
    frames = recording.stacked(modality)
    if modality == "rgb":
        return encode_rgb_mp4(frames, camera.fps)
    if modality == "depth":
        return encode_depth_npz(frames, camera.fps, recording.stride)
    return encode_segmentation_npz(frames, names, camera.fps, recording.stride)


def episode_files(
    recorder: FrameRecorder, batch_index: int, episode_index: int, control_rate_hz: float
) -> list[tuple[str | None, str, str, bytes]]:
    """``(camera, modality, file name, bytes)`` of every file of the episode, in a fixed
    order (cameras in task order, modalities in canonical order, metadata last)."""
    names = recorder.labels.names
    files: list[tuple[str | None, str, str, bytes]] = []
    cameras_meta: dict[str, Any] = {}
    for name, recording in recorder.recordings.items():
        camera = recording.camera
        file_names = {}
        for modality in camera.modalities:
            file_name = camera_file_name(batch_index, episode_index, name, modality)
            files.append((name, modality, file_name, _encode(recording, modality, names)))
            file_names[modality] = file_name
        cameras_meta[name] = {
            "width": camera.width,
            "height": camera.height,
            "fovy_deg": camera.fovy_deg,
            "fps": camera.fps,
            "stride": recording.stride,
            "frame_count": recording.frame_count,
            "modalities": list(camera.modalities),
            "mount": camera.mount,
            "intrinsics": intrinsics(camera.width, camera.height, camera.fovy_deg),
            "files": file_names,
            "position_m": [[float(v) for v in p] for p in recording.positions],
            "quat_wxyz": [[float(v) for v in q] for q in recording.quats],
        }
    metadata = {
        "schema_version": METADATA_SCHEMA_VERSION,
        "batch_index": batch_index,
        "episode_index": episode_index,
        "control_rate_hz": control_rate_hz,
        "depth_unit_m": DEPTH_UNIT_M,
        "depth_invalid": 0,
        "labels": recorder.labels.to_dict(),
        "cameras": cameras_meta,
    }
    files.append(
        (None, METADATA_MODALITY, metadata_file_name(batch_index, episode_index),
         metadata_bytes(metadata))
    )
    return files


def _write_temporary(path: Path, data: bytes, fence: Any) -> Path:
    """``data`` in a fsynced temp file beside ``path`` (named like every fenced writer's)."""
    fd, temporary = tempfile.mkstemp(
        prefix=temp_name(f".{path.name}.", fence), suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Path(temporary)


def commit_episode_files(
    recorder: FrameRecorder,
    directory: Path,
    batch_index: int,
    episode_index: int,
    *,
    control_rate_hz: float,
    log_path: Callable[[Path], str],
    fence: Any = None,
) -> list[dict[str, Any]]:
    """Encode and durably write every camera file; their receipts (:func:`write_episode_files`)."""
    files = episode_files(recorder, batch_index, episode_index, control_rate_hz)
    return write_episode_files(files, directory, log_path=log_path, fence=fence)


def write_episode_files(
    files: Sequence[tuple[str | None, str, str, bytes]],
    directory: Path,
    *,
    log_path: Callable[[Path], str],
    fence: Any = None,
) -> list[dict[str, Any]]:
    """Write already encoded camera files (:func:`episode_files`) durably; their receipts for
    ``TrajectoryCommitted.files``.

    All files go to fsynced temp files first; then ``fence`` (the collecting session) is
    checked once, every temp file is renamed to its name and the folder is fsynced once. A
    failure before the renames (a full disk, a lost lease) leaves no file under its name.
    The collection driver calls this with bytes a worker encoded (possibly on another
    machine): encoding and writing are separate so that only the lease holder writes."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    receipts = []
    written: list[tuple[Path, Path]] = []
    try:
        for camera, modality, file_name, data in files:
            path = directory / file_name
            written.append((_write_temporary(path, data, fence), path))
            receipts.append(
                {
                    "camera": camera,
                    "modality": modality,
                    "path": log_path(path),
                    "bytes": len(data),
                    "sha256": sha256_hex(data),
                }
            )
        if fence is not None:
            fence.check()
        for temporary, path in written:
            os.replace(temporary, path)
    except BaseException:
        for temporary, _path in written:
            temporary.unlink(missing_ok=True)
        raise
    fsync_directory(directory)
    return receipts
