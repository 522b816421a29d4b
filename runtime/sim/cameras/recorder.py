"""Frames of one episode, captured on the trajectory's own clock.

``FrameRecorder`` stands in for the ``TrajectoryRecorder`` the skills are given: every
control sample it forwards to the trajectory, and on every ``stride``-th sample (sample 0,
the observation before the first action, included) it notes the scene's joint positions
for each camera due. So frame ``k`` of a camera is trajectory sample ``k * stride`` and its
timestamp is ``k / fps`` seconds after the program started: an integer index divided once,
never a sum of float intervals. Skills never know whether cameras are on.

Each noted sample is sent at once to the render process (``render_server``), which renders
it from its own ``MjData`` whose kinematics are recomputed from the noted ``qpos``, and
feeds each RGB frame to its H.264 encoder there (``Mp4Encoder``: the same bytes as encoding
them all at the end). So the frames are drawn on the second core while the physics runs on
the first, and ``recordings`` (asked for when the episode is committed) only waits for the
last ones. What a frame shows depends only on the noted positions, so it is the same
whenever and in whichever process it is rendered. A rejected episode's frames are dropped
when the next episode begins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
    encoded: dict[str, bytes] = field(default_factory=dict)  # file bytes made while recording

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
        self.render_seconds = 0.0  # spent in the render process, for the benchmark
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
            qpos = np.array(self.env.data.qpos, dtype=np.float64)
            self._positions.append(qpos)
            self._due.append(due)
            self.renderer.sample(qpos, [c.name for c in due])

    def begin(self, observation: Mapping[str, np.ndarray]) -> None:
        self.trajectory.begin(observation)
        self.renderer.begin()
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
        """Every camera's frames, once the render process has drawn them all (module doc)."""
        if self._recordings is None:
            self._recordings = self._collect()
        return self._recordings

    def _collect(self) -> dict[str, CameraRecording]:
        result = self.renderer.finish()  # a rendering error surfaces here, with its type
        self.render_seconds = float(result["seconds"])
        recordings = {}
        for camera in self._cameras:
            take = result["cameras"][camera.name]
            images = {
                modality: [] if stack is None else list(stack)
                for modality, stack in take["images"].items()
            }
            recordings[camera.name] = CameraRecording(
                camera, self._strides[camera.name], images, list(take["positions"]),
                list(take["quats"]), dict(take["encoded"]),
            )
        return recordings

    def to_payload(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.trajectory.to_payload(metadata))
