"""Frames of one episode, captured on the trajectory's own clock.

``FrameRecorder`` stands in for the ``TrajectoryRecorder`` the skills are given: every
control sample it forwards to the trajectory, and on every ``stride``-th sample (sample 0,
the observation before the first action, included) it notes the scene's joint positions
for each camera due. So frame ``k`` of a camera is trajectory sample ``k * stride`` and its
timestamp is ``k / fps`` seconds after the program started: an integer index divided once,
never a sum of float intervals. Skills never know whether cameras are on.

Each noted sample is handed at once to the rig's render thread (``RenderThread``), which
renders it from its own scratch ``MjData`` whose kinematics are recomputed from the noted
``qpos``: the frames are drawn on the second core while the physics runs on the first, and
``recordings`` (asked for when the episode is committed) only waits for the last ones. What
a frame shows depends only on the noted positions, so it is the same whenever and on
whichever thread it is rendered. RGB frames are fed to their H.264 encoder on the same
thread as they are drawn (``Mp4Encoder``: the same bytes as encoding them all at the end).
A rejected episode's frames are simply dropped; a new episode (``begin``) cancels whatever
of the previous one has not started.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from domain.cameras import CameraSpec
from runtime.sim.cameras.encoding import Mp4Encoder
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
    rgb_encoder: Mp4Encoder | None = None  # fed on the render thread as frames arrive
    encoded: dict[str, bytes] = field(default_factory=dict)  # file bytes, once finished

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
        self._pending: list[Future[None]] = []
        self._scratch: mujoco.MjData | None = None  # used on the render thread only
        self._recordings: dict[str, CameraRecording] = self._empty_recordings()
        self._complete = False
        self.samples = 0
        rig.adopt(self)

    @property
    def labels(self) -> SegmentationLabels:
        return self.renderer.labels

    @property
    def num_actions(self) -> int:
        return int(self.trajectory.num_actions)

    def _empty_recordings(self) -> dict[str, CameraRecording]:
        return {
            c.name: CameraRecording(c, self._strides[c.name], {m: [] for m in c.modalities}, [], [])
            for c in self._cameras
        }

    def _note(self) -> None:
        due = tuple(c for c in self._cameras if self.samples % self._strides[c.name] == 0)
        if due:
            qpos = np.array(self.env.data.qpos, dtype=np.float64)
            self._positions.append(qpos)
            self._due.append(due)
            recordings = self._recordings
            self._pending.append(
                self.renderer.submit(lambda renderer: self._render(renderer, recordings, qpos, due))
            )

    def cancel_pending(self) -> None:
        """Drop the frames not yet rendered (the episode will not be committed)."""
        self._cancel_pending()
        self._complete = False

    def _cancel_pending(self) -> None:
        for future in self._pending:
            future.cancel()
        for future in self._pending:
            if not future.cancelled():
                try:
                    future.result()
                except Exception:  # noqa: S110 - that episode's frames are dropped anyway
                    pass
        self._pending = []
        for recording in self._recordings.values():
            if recording.rgb_encoder is not None and "rgb" not in recording.encoded:
                recording.rgb_encoder.close()
                recording.rgb_encoder = None

    def begin(self, observation: Mapping[str, np.ndarray]) -> None:
        self.trajectory.begin(observation)
        self._cancel_pending()
        self._positions.clear()
        self._due.clear()
        self._recordings = self._empty_recordings()
        self._complete = False
        self.samples = 0
        self._note()

    def record(self, action: np.ndarray, observation: Mapping[str, np.ndarray]) -> None:
        self.trajectory.record(action, observation)
        self.samples += 1
        self._note()

    @property
    def recordings(self) -> dict[str, CameraRecording]:
        """Every camera's frames, once the render thread has drawn them all (module doc)."""
        if not self._complete:
            pending, self._pending = self._pending, []
            for future in pending:
                future.result()  # in order; a rendering error surfaces here, with its type
            self.renderer.call(lambda _renderer: self._finish_videos())
            self._complete = True
        return self._recordings

    def _finish_videos(self) -> None:
        for recording in self._recordings.values():
            if recording.rgb_encoder is not None:
                recording.encoded["rgb"] = recording.rgb_encoder.finish()
                recording.rgb_encoder = None

    def _render(
        self,
        renderer: Any,
        recordings: dict[str, CameraRecording],
        qpos: np.ndarray,
        due: tuple[CameraSpec, ...],
    ) -> None:
        """On the render thread: the frames of one sample, appended in sample order."""
        model = self.model
        if self._scratch is None:
            self._scratch = mujoco.MjData(model)
        data = self._scratch
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_camlight(model, data)
        for camera in due:
            frame = renderer.render(data, camera)
            recording = recordings[camera.name]
            for modality, image in frame.images.items():
                recording.images[modality].append(image)
            recording.positions.append(frame.position_m)
            recording.quats.append(frame.quat_wxyz)
            if "rgb" in frame.images:
                if recording.rgb_encoder is None:
                    recording.rgb_encoder = Mp4Encoder(camera.fps, camera.width, camera.height)
                recording.rgb_encoder.add(frame.images["rgb"])

    def to_payload(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.trajectory.to_payload(metadata))
