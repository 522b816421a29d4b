"""robomimic HDF5 files (the layout ``robomimic.utils.dataset.SequenceDataset`` reads).

::

    data                 attrs: total (samples), env_args (JSON), assetcast (JSON manifest
                         header; its episodes are the demos' provenance attributes)
    data/demo_N          attrs: num_samples, model_file (compiled scene MJCF), model_mjb
                         (path of the exact compiled model in models/), provenance
        states           [T, D]  MuJoCo's state (mj_getState, signature in env_args): set
                         it, apply the action, step, and the next state follows exactly
                         (runs recorded before it: robot qpos + qvel + entity poses)
        actions          [T, A]  (+ actions_<name> for further action representations)
        rewards, dones   [T]     sparse: 1 at the last step of an accepted episode
        obs/<key>        [T, ...] observation before each action; cameras as <camera>_image
                         (uint8 HWC), <camera>_depth (uint16 mm, HW1), <camera>_segmentation
        next_obs/<key>   [T, ...] observation after it
    mask/train, mask/valid       demo names, a seeded split that is stable as episodes are added
    models/<digest>      uint8: MuJoCo's binary model (MJB), once per distinct scene

Determinism: no HDF5 timestamps (``track_times=False``), fixed file-format bounds, fixed
creation order, no compression, so the same episodes give the same bytes. The file is written
one batch at a time, closed after each (HDF5 keeps no state between sessions beyond the file's
bytes), so a live update that copies the previous file and writes the new batches produces
exactly the bytes of a one-shot export: its cost is a file copy and hash plus the new batches,
not a rewrite of every demo through h5py.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from domain.canonical import canonical_json, sha256_hex
from runtime.export.episodes import CommittedEpisode, DatasetSource, EpisodeData, batch_ranges
from runtime.export.errors import NotADataset
from runtime.export.features import (
    camera_layout,
    common_columns,
    control_fps,
    frame_rows,
    values,
)

log = structlog.get_logger(__name__)

VALID_FRACTION = 0.1
LIBVER = ("v110", "v110")
_STATE_KEYS = ("robot_qpos", "robot_qvel", "entity_pose")
_OBS_SUFFIX = {"rgb": "image", "depth": "depth", "segmentation": "segmentation"}


def is_valid_split(trajectory_sha256: str, seed: int, fraction: float = VALID_FRACTION) -> bool:
    """Whether an episode is in the validation split: a hash threshold per episode, so an
    episode keeps its side as the dataset grows and across resumed runs."""
    value = int(sha256_hex(f"{seed}:{trajectory_sha256}".encode())[:16], 16)
    return value < fraction * 16**16


def _states_description(physics: Any) -> dict[str, Any]:
    """What ``states`` holds: MuJoCo's state (signature and element names for
    ``mj_setState``), or, for runs recorded before it was, the old composite vector."""
    if physics is None:
        return {
            "layout": "robot_qpos+robot_qvel+entity_pose",
            "replayable": False,
        }
    from runtime.sim.environment import CONTROL_DECIMATION
    from runtime.sim.physics_state import signature_of

    return {
        "layout": "mj_getState",
        "signature": signature_of(physics.names),
        "replayable": True,
        "model": "each demo's model_mjb attribute names the exact compiled model (MJB bytes); "
                 "model_file (MJCF text) is the same scene with numbers rounded",
        "restore": "mj_resetData; mj_setState(states[t], signature); ctrl = actions[t]; "
                   "mj_step(nstep=substeps) gives states[t + 1] exactly (camera_stride 1; "
                   "with a larger stride the actions between frames are in the trajectory)",
        "substeps": CONTROL_DECIMATION,
    }


def _binary_model(handle: Any, mjb: bytes) -> str:
    """Store a compiled model once per file (``models/<digest>``, uint8); return its path."""
    name = f"models/{sha256_hex(mjb)[:32]}"
    if name not in handle:
        models = handle.require_group("models")
        models.create_dataset(name.split("/", 1)[1], data=np.frombuffer(mjb, dtype=np.uint8),
                              track_times=False)
    return name


def _dataset(group: Any, name: str, data: np.ndarray) -> None:
    group.create_dataset(name, data=data, track_times=False)


def _header(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k != "episodes"}


@dataclass(frozen=True)
class _Written:
    """A file this process published: what it holds, as long as it is unchanged."""

    identity: tuple[int, int, int]
    manifest: dict[str, Any]


_WRITTEN: dict[str, _Written] = {}


def _identity(path: Path) -> tuple[int, int, int]:
    status = os.stat(path)
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def remember_published(path: Path, manifest: dict[str, Any]) -> None:
    """``path`` now holds ``manifest`` (written by :func:`write_robomimic`, published)."""
    _WRITTEN.clear()  # only the latest file is ever extended
    _WRITTEN[str(path)] = _Written(_identity(path), manifest)


def _known(path: Path) -> _Written | None:
    found = _WRITTEN.get(str(path))
    try:
        return found if found is not None and found.identity == _identity(path) else None
    except OSError:
        return None


def is_published(path: Path) -> bool:
    """Whether this process published the file at ``path`` and nobody changed it since."""
    return _known(path) is not None


def reusable_prefix(path: Path, manifest: dict[str, Any]) -> int:
    """How many leading episodes of the file at ``path`` a new version for ``manifest`` takes
    over as they are: only a file this process published and nobody changed since, only
    whole batches, and nothing that shapes the file may differ (0: write it whole)."""
    known = _known(path)
    if known is None or _header(known.manifest) != _header(manifest):
        return 0
    old, new = known.manifest["episodes"], manifest["episodes"]
    count = len(old)
    if not 0 < count < len(new) or new[:count] != old:
        return 0
    key = ("run_id", "batch_index")
    if [new[count][k] for k in key] == [new[count - 1][k] for k in key]:
        return 0  # the file ends inside a batch: its last write covered part of it only
    return count


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of an assetcast robomimic file: the header in ``data.attrs["assetcast"]``
    and every demo's provenance attributes (files of an earlier writer: the whole manifest in
    that attribute). ``NotADataset`` when it is not one."""
    known = _known(path)
    if known is not None:
        return known.manifest
    import h5py

    if not path.is_file():
        raise NotADataset(f"{path} exists and is not an assetcast dataset")
    try:
        with h5py.File(path, "r") as handle:
            data = handle["data"]
            raw = data.attrs["assetcast"]
            try:
                manifest = json.loads(raw)
            except ValueError:
                raise NotADataset(f"{path} has an unreadable assetcast manifest") from None
            if not isinstance(manifest, dict) or "episodes" in manifest:
                return manifest
            manifest["episodes"] = [
                _provenance_of(data[f"demo_{i}"].attrs) for i in range(len(data))
            ]
    except (OSError, KeyError):
        raise NotADataset(f"{path} exists and is not an assetcast robomimic file") from None
    return manifest


def _provenance_of(attrs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in PROVENANCE_KEYS:
        value = attrs[key]
        if key in _JSON_PROVENANCE:
            out[key] = json.loads(value)
        elif key in _INT_PROVENANCE:
            out[key] = int(value)
        else:
            out[key] = str(value)
    return out


PROVENANCE_KEYS = ("run_id", "batch_index", "episode_index", "asset_set_id", "assets",
                   "trajectory_sha256", "commit_seq", "camera_files")
_JSON_PROVENANCE = ("assets", "camera_files")
_INT_PROVENANCE = ("batch_index", "episode_index", "commit_seq")


@dataclass(frozen=True)
class _Layout:
    """What every demo shares (fixed by the first episode; new ones must match it)."""

    observations: list[Any]
    actions: list[Any]
    physics: Any
    cameras: dict[str, tuple[int, int, tuple[str, ...]]]
    stride: int
    env_args: str


def _layout(source: DatasetSource, named: list[tuple[str, EpisodeData]]) -> _Layout:
    columns = common_columns(named)
    layout = camera_layout(named)
    stride = layout.stride
    fps = control_fps(named) // stride
    observations = [c for c in columns if c.kind == "observation"]
    actions = [c for c in columns if c.kind == "action"]
    physics = next((c for c in columns if c.kind == "state"), None)
    if physics is None:
        log.warning("robomimic_states_not_replayable", task_id=source.task_id,
                    reason="trajectories recorded before MuJoCo's state was")
    env_args = json.dumps(
        {
            "env_name": source.task_id,
            "type": 4,  # not a robomimic simulator: rollouts need assetcast's environment
            "env_kwargs": {
                "task_id": source.task_id,
                "instruction": source.instruction,
                "control_fps": fps,
                "observation_keys": [c.robomimic_key for c in observations] + [
                    f"{cam}_{_OBS_SUFFIX[m]}"
                    for cam, (_h, _w, modalities) in layout.cameras.items()
                    for m in modalities
                ],
                "camera_stride": stride,
                "states": _states_description(physics),
                "names": {c.robomimic_key: list(c.names) for c in columns},
                "units": {c.robomimic_key: list(c.units) if c.units else None
                          for c in columns},
            },
        },
        sort_keys=True,
    )
    return _Layout(observations, actions, physics, layout.cameras, stride, env_args)


def write_robomimic(
    source: DatasetSource, path: Path, *, manifest: dict[str, Any], split_seed: int,
    scene_model: Any, previous: Path | None = None,
) -> dict[str, int]:
    """Write the file at ``path`` (a fresh temporary file) batch by batch; return totals.

    ``previous`` (the published file): the whole batches it shares with the new version
    (:func:`reusable_prefix`) are copied byte for byte and only the new batches are written,
    which gives the same bytes as writing every batch."""
    import h5py

    episodes = source.episodes
    reused = reusable_prefix(previous, manifest) if previous is not None else 0
    fresh = range(reused, len(episodes))
    # The first episode fixes the layout, as in a whole export; new ones must share it.
    named = [(episodes[i].name, source.load(episodes[i])) for i in sorted({0, *fresh})]
    layout = _layout(source, named)
    loaded = dict(zip(sorted({0, *fresh}), (data for _name, data in named), strict=True))
    if reused:
        assert previous is not None
        shutil.copyfile(previous, path)
    total = 0
    # One batch at a time, the file closed after each: the bytes are those of that sequence
    # of writes, so a file holding the first batches is extended by copying it.
    for step in batch_ranges(episodes):
        if step.stop <= reused:
            continue
        mode = "w" if step.start == 0 else "r+"
        with h5py.File(path, mode, libver=LIBVER, track_order=True) as handle:
            if mode == "w":
                handle.create_group("data", track_order=True)
                handle.create_group("mask", track_order=True)
            data_group = handle["data"]
            total = int(data_group.attrs.get("total", 0))
            for i in step:
                data = loaded.pop(i) if i in loaded else source.load(episodes[i])
                total += _write_demo(handle, data_group, i, episodes[i], data, layout,
                                     scene_model)
            data_group.attrs["total"] = total
            data_group.attrs["env_args"] = layout.env_args
            data_group.attrs["assetcast"] = canonical_json(_header(manifest))
            _write_masks(handle["mask"], episodes[: step.stop], split_seed)
    return {"total_episodes": len(episodes), "total_frames": total}


def _write_masks(mask: Any, episodes: Sequence[CommittedEpisode], split_seed: int) -> None:
    train: list[bytes] = []
    valid: list[bytes] = []
    for i, episode in enumerate(episodes):
        name = f"demo_{i}".encode()
        (valid if is_valid_split(episode.provenance.trajectory_sha256, split_seed)
         else train).append(name)
    for key, names in (("train", train), ("valid", valid)):
        if key in mask:
            del mask[key]
        mask.create_dataset(key, data=np.array(names, dtype="S"), track_times=False)


def _write_demo(
    handle: Any, data_group: Any, i: int, episode: CommittedEpisode, data: EpisodeData,
    layout: _Layout, scene_model: Any,
) -> int:
    """One ``data/demo_i``; returns its number of samples."""
    stride = layout.stride
    rows = frame_rows(data, stride)
    steps = len(rows)
    after = np.minimum(rows + stride, data.num_actions)
    demo = data_group.create_group(f"demo_{i}", track_order=True)
    demo.attrs["num_samples"] = steps
    scene = scene_model(episode.deployment_path)
    demo.attrs["model_file"] = scene.mjcf
    demo.attrs["model_mjb"] = _binary_model(handle, scene.mjb)
    for key, value in episode.provenance.to_dict().items():
        demo.attrs[key] = canonical_json(value) if isinstance(value, dict) else value
    if layout.physics is not None:
        _dataset(demo, "states", values(layout.physics, data)[rows])
    else:
        legacy = [values(c, data)[rows] for c in layout.observations if c.source in _STATE_KEYS]
        _dataset(demo, "states", np.concatenate(legacy, axis=1))
    for column in layout.actions:
        _dataset(demo, column.robomimic_key, values(column, data)[rows])
    done = np.zeros(steps, dtype=np.int64)
    done[-1] = 1
    _dataset(demo, "rewards", done.astype(np.float64))
    _dataset(demo, "dones", done)
    obs = demo.create_group("obs", track_order=True)
    next_obs = demo.create_group("next_obs", track_order=True)
    for column in layout.observations:
        matrix = values(column, data)
        _dataset(obs, column.robomimic_key, matrix[rows])
        _dataset(next_obs, column.robomimic_key, matrix[after])
    for cam in layout.cameras:
        frames = data.cameras.cameras[cam].frames
        last = min(len(f) for f in frames.values()) - 1
        index = np.arange(steps)
        for modality, array in frames.items():
            key = f"{cam}_{_OBS_SUFFIX[modality]}"
            image = array if array.ndim == 4 else array[..., None]
            _dataset(obs, key, image[index])
            _dataset(next_obs, key, image[np.minimum(index + 1, last)])
    return steps
