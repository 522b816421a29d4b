"""Frames of one episode, captured on the trajectory's own clock.

``FrameRecorder`` stands in for the ``TrajectoryRecorder`` the skills are given: every
control sample it forwards to the trajectory, and on every ``stride``-th sample (sample 0,
the observation before the first action, included) it renders each camera. So frame ``k``
of a camera is trajectory sample ``k * stride`` and its timestamp is ``k / fps`` seconds
after the program started: an integer index divided once, never a sum of float intervals.
Skills never know whether cameras are on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    """A trajectory recorder that also renders the task's cameras (see the module doc)."""

    def __init__(self, trajectory: Any, rig: CameraRig, env: Any) -> None:
        self.trajectory = trajectory
        self.env = env
        self.renderer = rig.renderer_for(env)
        strides = rig.strides(env)
        self.recordings = {
            c.name: CameraRecording(c, strides[c.name], {m: [] for m in c.modalities}, [], [])
            for c in rig.cameras
        }
        self.samples = 0

    @property
    def labels(self) -> SegmentationLabels:
        return self.renderer.labels

    @property
    def num_actions(self) -> int:
        return int(self.trajectory.num_actions)

    def _capture(self) -> None:
        for recording in self.recordings.values():
            if self.samples % recording.stride:
                continue
            frame = self.renderer.render(self.env.data, recording.camera)
            for modality, image in frame.images.items():
                recording.images[modality].append(image)
            recording.positions.append(frame.position_m)
            recording.quats.append(frame.quat_wxyz)

    def begin(self, observation: Mapping[str, np.ndarray]) -> None:
        self.trajectory.begin(observation)
        for recording in self.recordings.values():
            for frames in recording.images.values():
                frames.clear()
            recording.positions.clear()
            recording.quats.clear()
        self.samples = 0
        self._capture()

    def record(self, action: np.ndarray, observation: Mapping[str, np.ndarray]) -> None:
        self.trajectory.record(action, observation)
        self.samples += 1
        self._capture()

    def to_payload(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.trajectory.to_payload(metadata))
