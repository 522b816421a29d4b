"""Dataset columns derived from what the recorder wrote, not from a fixed list.

Every array of a trajectory becomes one column: per-sample observations (``T + 1`` rows) and
per-interval actions (``T`` rows), told apart by their row count. Column names and units come
from the trajectory's own metadata (``columns[key] = {names, units}``, written by the
recorder; older files fall back to ``joint_names`` / ``entity_ids``), so a robot that adds
arrays (joint velocities, end-effector poses, a second action representation) shows up in
every dataset format without touching the exporters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.export.episodes import EpisodeData
from runtime.export.errors import TaskMismatch

TIME_KEY = "timestamps"
PHYSICS_STATE_KEY = "physics_state"  # MuJoCo's state (runtime.sim.physics_state): robomimic
# `states`, not an observation a policy sees
ACTION_KEY = "actions"
POSE_AXES = ("x", "y", "z", "qw", "qx", "qy", "qz")
LEROBOT_PREFIXES = ("observation.", "action.")


def lerobot_key(key: str, kind: str, keys: Sequence[str]) -> str:
    """LeRobot's name for a recorded array: keys the recorder already names LeRobot-style
    (``observation.state``, ``action.ee_delta``) keep it; ``actions`` (what was applied) is
    ``action``; the joint positions are ``observation.state`` unless the robot records its
    own; everything else gets the ``observation.`` / ``action.`` prefix."""
    if key.startswith(LEROBOT_PREFIXES):
        return key
    if key == ACTION_KEY:
        return "action"
    if key == "robot_qpos" and "observation.state" not in keys:
        return "observation.state"
    return f"{kind}.{key}"


@dataclass(frozen=True)
class Column:
    """One recorded array, flattened to ``[rows, width]``."""

    source: str  # key in the trajectory payload
    kind: str  # "observation" / "state" (T + 1 rows) or "action" (T rows)
    names: tuple[str, ...]
    units: tuple[str, ...] | None = None
    lerobot_key: str = ""  # the feature name in a LeRobot dataset

    @property
    def width(self) -> int:
        return len(self.names)

    @property
    def robomimic_key(self) -> str:
        """The dataset name in a robomimic demo (``obs/<key>`` or an actions dataset)."""
        if self.kind == "action":
            if self.source == ACTION_KEY:
                return ACTION_KEY
            return "actions_" + self.source.removeprefix("action.").removeprefix("actions_")
        return self.source.removeprefix("observation.")

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "kind": self.kind, "names": list(self.names),
                "units": list(self.units) if self.units is not None else None}


def _default_names(key: str, shape: tuple[int, ...], meta: Mapping[str, Any]) -> list[str]:
    joints = list(meta.get("joint_names") or [])
    entities = list(meta.get("entity_ids") or [])
    inner = shape[1:]
    width = int(np.prod(inner)) if inner else 1
    if key in ("robot_qpos", "robot_qvel", ACTION_KEY) and len(joints) == width:
        return joints
    if len(inner) == 2 and inner == (len(entities), len(POSE_AXES)):
        return [f"{e}.{axis}" for e in entities for axis in POSE_AXES]
    if not inner:
        return [key]
    return [f"{key}_{i}" for i in range(width)]


def columns_of(data: EpisodeData) -> tuple[Column, ...]:
    """The columns of one trajectory, in payload key order (which the recorder fixes)."""
    meta = data.metadata
    declared = meta.get("columns") or {}
    samples = data.arrays[TIME_KEY].shape[0]
    columns = []
    for key, array in data.arrays.items():
        if key == TIME_KEY:
            continue
        if array.shape[0] == samples:
            kind = "state" if key == PHYSICS_STATE_KEY else "observation"
        elif array.shape[0] == samples - 1:
            kind = "action"
        else:
            continue  # not a per-step array
        width = int(np.prod(array.shape[1:])) if array.ndim > 1 else 1
        spec = declared.get(key) or {}
        names = spec.get("names")
        if not (isinstance(names, Sequence) and len(names) == width):
            names = _default_names(key, array.shape, meta)
        units = spec.get("units")
        if not (isinstance(units, Sequence) and len(units) == width):
            units = None
        columns.append(
            Column(key, kind, tuple(str(n) for n in names),
                   tuple(str(u) for u in units) if units is not None else None,
                   lerobot_key(key, kind, list(data.arrays)))
        )
    return tuple(columns)


def values(column: Column, data: EpisodeData) -> np.ndarray:
    """``[rows, width]`` float64 values of ``column`` in ``data``."""
    array = np.asarray(data.arrays[column.source], dtype=np.float64)
    return array.reshape(array.shape[0], column.width)


def _column_inputs(data: EpisodeData) -> tuple[Any, ...]:
    """All that :func:`columns_of` reads: the arrays' names, their row counts relative to the
    samples' and their inner shapes, the names metadata."""
    meta = data.metadata
    samples = data.arrays[TIME_KEY].shape[0]
    shapes = tuple(
        (key, array.shape[0] - samples, array.shape[1:]) for key, array in data.arrays.items()
    )
    return shapes, meta.get("columns"), meta.get("joint_names"), meta.get("entity_ids")


def common_columns(episodes: Sequence[tuple[str, EpisodeData]]) -> tuple[Column, ...]:
    """The one column set all episodes share; a difference is refused, naming the episode."""
    first_name, first = episodes[0]
    columns = columns_of(first)
    inputs = _column_inputs(first)
    for name, data in episodes[1:]:
        if _column_inputs(data) == inputs:
            continue  # the same inputs give the same columns
        other = columns_of(data)
        if other != columns:
            raise TaskMismatch(
                f"{name} records columns {[c.source for c in other]} with other names or widths "
                f"than {first_name} ({[c.source for c in columns]}); one dataset needs one layout"
            )
    return columns


def control_fps(episodes: Sequence[tuple[str, EpisodeData]]) -> int:
    """Frames per second of the recording, from its timestamps; it must be a whole number
    and the same in every episode (LeRobot stores one ``fps``)."""
    rates = set()
    for name, data in episodes:
        meta_fps = data.metadata.get("fps")
        if meta_fps is not None:
            rates.add(int(meta_fps))
            continue
        times = np.asarray(data.arrays[TIME_KEY], dtype=np.float64)
        if times.shape[0] < 2:
            raise TaskMismatch(f"{name} has fewer than two samples")
        dt = float(np.median(np.diff(times)))
        fps = round(1.0 / dt)
        if fps <= 0 or abs(1.0 / dt - fps) > 1e-6 * fps:
            raise TaskMismatch(f"{name} is sampled every {dt} s, not a whole number of frames/s")
        rates.add(fps)
    if len(rates) != 1:
        raise TaskMismatch(f"episodes are recorded at different rates: {sorted(rates)} frames/s")
    return rates.pop()


@dataclass(frozen=True)
class CameraLayout:
    """The cameras every episode shares: name -> (height, width, modalities), one stride."""

    cameras: dict[str, tuple[int, int, tuple[str, ...]]]
    stride: int  # control intervals between two camera frames (1: a frame every step)


def camera_layout(episodes: Sequence[tuple[str, EpisodeData]]) -> CameraLayout:
    """The shared camera layout (empty without cameras); differences are refused."""
    layouts = set()
    for name, data in episodes:
        cameras = {} if data.cameras is None else data.cameras.cameras
        entries = {
            cam: (int(c.metadata["height"]), int(c.metadata["width"]),
                  tuple(c.metadata["modalities"]))
            for cam, c in cameras.items()
        }
        strides = {int(c.metadata["stride"]) for c in cameras.values()} or {1}
        if len(strides) != 1:
            raise TaskMismatch(f"{name}: cameras record at different rates {sorted(strides)}")
        layouts.add((tuple(sorted(entries.items())), strides.pop()))
    if len(layouts) != 1:
        raise TaskMismatch("episodes record different cameras; one dataset needs one layout")
    entries, stride = layouts.pop()
    return CameraLayout(dict(entries), stride)


def frame_rows(data: EpisodeData, stride: int) -> np.ndarray:
    """Trajectory samples that become dataset frames: every ``stride``-th, each followed by
    an action (so the final observation is never a frame of its own)."""
    return np.arange(0, data.num_actions, stride, dtype=np.int64)
