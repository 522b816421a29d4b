"""robomimic HDF5 files (the layout ``robomimic.utils.dataset.SequenceDataset`` reads).

::

    data                 attrs: total (samples), env_args (JSON), assetcast (JSON manifest)
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
creation order, no compression, so the same episodes give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from domain.canonical import canonical_json, sha256_hex
from runtime.export.episodes import DatasetSource
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


def write_robomimic(
    source: DatasetSource, path: Path, *, manifest: dict[str, Any], split_seed: int,
    scene_model: Any,
) -> dict[str, int]:
    """Write the whole file at ``path`` (a fresh temporary file); return totals."""
    import h5py

    loaded = [(f"run {e.provenance.run_id} batch {e.provenance.batch_index} episode "
               f"{e.provenance.episode_index}", data) for e, data in source.iter_loaded()]
    columns = common_columns(loaded)
    layout = camera_layout(loaded)
    stride = layout.stride
    fps = control_fps(loaded) // stride
    observations = [c for c in columns if c.kind == "observation"]
    actions = [c for c in columns if c.kind == "action"]
    physics = next((c for c in columns if c.kind == "state"), None)
    if physics is None:
        log.warning("robomimic_states_not_replayable", task_id=source.task_id,
                    reason="trajectories recorded before MuJoCo's state was")
    total = 0
    train: list[bytes] = []
    valid: list[bytes] = []
    with h5py.File(path, "w", libver=LIBVER, track_order=True) as handle:
        data_group = handle.create_group("data", track_order=True)
        for i, (episode, (_name, data)) in enumerate(zip(source.episodes, loaded, strict=True)):
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
            if physics is not None:
                _dataset(demo, "states", values(physics, data)[rows])
            else:
                legacy = [values(c, data)[rows] for c in observations if c.source in _STATE_KEYS]
                _dataset(demo, "states", np.concatenate(legacy, axis=1))
            for column in actions:
                _dataset(demo, column.robomimic_key, values(column, data)[rows])
            done = np.zeros(steps, dtype=np.int64)
            done[-1] = 1
            _dataset(demo, "rewards", done.astype(np.float64))
            _dataset(demo, "dones", done)
            obs = demo.create_group("obs", track_order=True)
            next_obs = demo.create_group("next_obs", track_order=True)
            for column in observations:
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
            total += steps
            name = f"demo_{i}".encode()
            (valid if is_valid_split(episode.provenance.trajectory_sha256, split_seed)
             else train).append(name)
        data_group.attrs["total"] = total
        data_group.attrs["env_args"] = json.dumps(
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
        data_group.attrs["assetcast"] = canonical_json(manifest)
        mask = handle.create_group("mask", track_order=True)
        mask.create_dataset("train", data=np.array(train, dtype="S"), track_times=False)
        mask.create_dataset("valid", data=np.array(valid, dtype="S"), track_times=False)
    return {"total_episodes": len(loaded), "total_frames": total}
