"""Decode the camera files of a committed episode, for exporters and people.

``read_episode_frames(output_dir, receipt)`` takes the run's output directory and the
episode's ``TrajectoryCommitted`` payload and returns, per camera, the decoded frames of
each modality plus the metadata file's content. Every file is checked against its receipt
(size and SHA-256) before it is decoded, so an exporter never trains on a damaged file.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from domain.canonical import sha256_hex
from domain.errors import AssetcastInputError
from runtime.sim.cameras.encoding import decode_rgb_mp4, read_npz
from runtime.sim.cameras.storage import METADATA_MODALITY


class CameraFileInvalid(AssetcastInputError):
    """A camera file is missing or differs from the receipt that names it."""


@dataclass(frozen=True)
class CameraFrames:
    """One camera of one episode. ``frames[modality]``: rgb (T,H,W,3) uint8, depth (T,H,W)
    uint16 millimetres (0 = nothing hit), segmentation (T,H,W) label ids. Frame ``k`` was
    taken at ``timestamps_s[k] = k / fps`` and is trajectory sample ``sample_index[k]``."""

    name: str
    frames: dict[str, np.ndarray]
    timestamps_s: np.ndarray
    sample_index: np.ndarray
    metadata: dict[str, Any]  # this camera's entry of bNNNN_eNNNN.cameras.json


@dataclass(frozen=True)
class EpisodeFrames:
    cameras: dict[str, CameraFrames]
    labels: dict[int, str]  # segmentation label id -> entity ("background", "robot", ...)
    metadata: dict[str, Any]  # the whole bNNNN_eNNNN.cameras.json


def _read_checked(output_dir: Path, entry: Mapping[str, Any]) -> bytes:
    logged = Path(str(entry["path"]))
    path = logged if logged.is_absolute() else Path(output_dir) / logged
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CameraFileInvalid(f"camera file {path}: cannot read ({error})") from error
    if len(data) != int(entry["bytes"]) or sha256_hex(data) != entry["sha256"]:
        raise CameraFileInvalid(f"camera file {path}: differs from its commit receipt")
    return data


def read_episode_frames(
    output_dir: Path | str,
    receipt: Mapping[str, Any],
    *,
    modalities: Collection[str] | None = None,
) -> EpisodeFrames:
    """All camera frames of one committed episode (empty when it has no camera files);
    with ``modalities``, only those files are read (each still checked first)."""
    entries = list(receipt.get("files") or ())
    if not entries:
        return EpisodeFrames({}, {}, {})
    output_dir = Path(output_dir)
    metadata_entry = next(e for e in entries if e["modality"] == METADATA_MODALITY)
    metadata = json.loads(_read_checked(output_dir, metadata_entry))
    decoded: dict[str, dict[str, np.ndarray]] = {}
    for entry in entries:
        camera, modality = entry["camera"], entry["modality"]
        if modality == METADATA_MODALITY or (modalities is not None and modality not in modalities):
            continue
        data = _read_checked(output_dir, entry)
        if modality == "rgb":
            decoded.setdefault(camera, {})["rgb"] = decode_rgb_mp4(data)[0]
        else:
            arrays = read_npz(data)
            key = "depth_mm" if modality == "depth" else "segmentation"
            decoded.setdefault(camera, {})[modality] = arrays[key]
    cameras = {}
    for name, camera_meta in metadata["cameras"].items():
        count, fps, stride = camera_meta["frame_count"], camera_meta["fps"], camera_meta["stride"]
        index = np.arange(count, dtype=np.int64)
        cameras[name] = CameraFrames(
            name=name,
            frames=decoded.get(name, {}),
            timestamps_s=index.astype(np.float64) / fps,
            sample_index=index * stride,
            metadata=camera_meta,
        )
    labels = {int(k): v for k, v in metadata["labels"].items()}
    return EpisodeFrames(cameras, labels, metadata)
