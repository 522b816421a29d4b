"""Cameras of a task: offscreen rendering, frame capture and the frame files of an episode.

One module per purpose: ``backend`` (which OpenGL backend), ``labels`` (segmentation ids),
``rendering`` (``mujoco.Renderer`` per camera), ``rig`` (cameras validated against an
environment), ``recorder`` (frames on the trajectory clock), ``encoding`` (file formats),
``storage`` (names and durable commit), ``visuals`` (textured meshes into the scene),
``reader`` (decode an episode's files), ``contact_sheet`` (a PNG for people).
"""

from runtime.sim.cameras.backend import BACKEND_ENV, ensure_backend, requested_backend
from runtime.sim.cameras.errors import RenderBackendUnavailable
from runtime.sim.cameras.labels import SegmentationLabels
from runtime.sim.cameras.recorder import FrameRecorder
from runtime.sim.cameras.rig import CameraRig, control_rate_hz

__all__ = [
    "BACKEND_ENV",
    "CameraRig",
    "FrameRecorder",
    "RenderBackendUnavailable",
    "SegmentationLabels",
    "control_rate_hz",
    "ensure_backend",
    "requested_backend",
]
