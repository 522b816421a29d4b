"""Frames of one episode, captured on the trajectory's own clock.

``FrameRecorder`` stands in for the ``TrajectoryRecorder`` the skills are given: every
control sample it forwards to the trajectory, and on every ``stride``-th sample (sample 0,
the observation before the first action, included) it notes the scene's joint positions
for each camera due. So frame ``k`` of a camera is trajectory sample ``k * stride`` and its
timestamp is ``k / fps`` seconds after the program started: an integer index divided once,
never a sum of float intervals. Skills never know whether cameras are on.

The frames themselves are rendered only when they are asked for (``recordings``), i.e. when
the episode is committed: back to back, from a scratch ``MjData`` whose kinematics are
recomputed from each noted ``qpos``. A rejected episode costs no rendering at all, and the
renderer runs hot instead of waking up between physics steps. What a frame shows depends
only on the noted positions, so it is the same whenever and wherever it is rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from domain.cameras import CameraSpec
from runtime.sim.cameras.labels import SegmentationLabels
from runtime.sim.cameras.rig import CameraRig


@dataclass
class CameraRecording:
    """Everything one camera captured in one episode (stacked on demand)."""

    camera: CameraSpec
    stride: int
    images: dict[str, list[np.ndarray]]
    positions: list[np.ndarray]
    quats: list[np.ndarray]

    @property
    def frame_count(self) -> int:
        return len(self.positions)

    def stacked(self, modality: str) -> np.ndarray:
        return np.stack(self.images[modality])


class FrameRecorder:
    """A trajectory recorder that also records the task's cameras (see the module doc)."""

    def __init__(self, trajectory: Any, rig: CameraRig, env: Any) -> None:
        self.trajectory = trajectory
        self.env = env
        self.model = env.model
        self.renderer = rig.renderer_for(env)
        strides = rig.strides(env)
        self._cameras = tuple(rig.cameras)
        self._strides = {c.name: strides[c.name] for c in self._cameras}
        self._positions: list[np.ndarray] = []  # qpos at each sample some camera is due
        self._due: list[tuple[CameraSpec, ...]] = []
        self._recordings: dict[str, CameraRecording] | None = None
        self.samples = 0

    @property
    def labels(self) -> SegmentationLabels:
        return self.renderer.labels

    @property
    def num_actions(self) -> int:
        return int(self.trajectory.num_actions)

    def _note(self) -> None:
        due = tuple(c for c in self._cameras if self.samples % self._strides[c.name] == 0)
        if due:
            self._positions.append(np.array(self.env.data.qpos, dtype=np.float64))
            self._due.append(due)

    def begin(self, observation: Mapping[str, np.ndarray]) -> None:
        self.trajectory.begin(observation)
        self._positions.clear()
        self._due.clear()
        self._recordings = None
        self.samples = 0
        self._note()

    def record(self, action: np.ndarray, observation: Mapping[str, np.ndarray]) -> None:
        self.trajectory.record(action, observation)
        self.samples += 1
        self._note()

    @property
    def recordings(self) -> dict[str, CameraRecording]:
        """Every camera's frames, rendered on first access (see the module doc)."""
        if self._recordings is None:
            self._recordings = self._render()
        return self._recordings

    def _render(self) -> dict[str, CameraRecording]:
        recordings = {
            c.name: CameraRecording(c, self._strides[c.name], {m: [] for m in c.modalities}, [], [])
            for c in self._cameras
        }
        model = self.model
        data = mujoco.MjData(model)
        for qpos, due in zip(self._positions, self._due, strict=True):
            data.qpos[:] = qpos
            mujoco.mj_kinematics(model, data)
            mujoco.mj_comPos(model, data)
            mujoco.mj_camlight(model, data)
            for camera in due:
                frame = self.renderer.render(data, camera)
                recording = recordings[camera.name]
                for modality, image in frame.images.items():
                    recording.images[modality].append(image)
                recording.positions.append(frame.position_m)
                recording.quats.append(frame.quat_wxyz)
        return recordings

    def to_payload(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.trajectory.to_payload(metadata))
