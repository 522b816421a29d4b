"""A task's cameras bound to an environment: validated against its compiled model.

What ``domain.cameras`` cannot know without the simulator is checked here: a mount names a
body that exists in the compiled scene (any robot's, by its model name), and every camera's
``fps`` divides the control rate, so frame ``k`` is exactly control sample ``k * stride``.
The rig keeps one renderer (a ``RemoteRenderer``: the ``CameraRenderer`` in the render
process) and rebuilds it when the environment's model is replaced (``replace_assets``
compiles a new one whose meshes must be uploaded again).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco

from domain.cameras import CameraSpec
from domain.errors import ConfigError
from runtime.sim.cameras.labels import SegmentationLabels, segmentation_labels
from runtime.sim.cameras.render_server import RemoteRenderer


def control_rate_hz(env: Any) -> float:
    """Recording samples per second of simulated time (one per control interval)."""
    from runtime.sim.environment import CONTROL_DECIMATION

    return 1.0 / (float(env.model.opt.timestep) * CONTROL_DECIMATION)


def frame_strides(
    cameras: Sequence[CameraSpec], rate_hz: float, source: str | None = None
) -> dict[str, int]:
    """Control samples between two frames of each camera; ``fps`` must divide the rate."""
    strides = {}
    for index, camera in enumerate(cameras):
        stride = rate_hz / camera.fps
        if abs(stride - round(stride)) > 1e-6 or round(stride) < 1:
            raise ConfigError(
                f"cameras[{index}].fps",
                f"{camera.fps} does not divide the control rate of {rate_hz:g} Hz",
                source=source,
            )
        strides[camera.name] = int(round(stride))
    return strides


def mount_bodies(
    cameras: Sequence[CameraSpec], model: mujoco.MjModel, source: str | None = None
) -> dict[str, int]:
    """Body id of each mounted camera's body; an unknown body is a ``ConfigError``."""
    bodies = {}
    for index, camera in enumerate(cameras):
        if camera.mount is None:
            continue
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, camera.mount)
        if body < 0:
            raise ConfigError(
                f"cameras[{index}].mount.body",
                f"no body {camera.mount!r} in the compiled scene",
                source=source,
            )
        bodies[camera.name] = body
    return bodies


def environment_labels(env: Any) -> SegmentationLabels:
    from runtime.sim.scene import entity_body_name

    entity_ids = [e.entity_id for e in env.task.scene.entities]
    bodies = {
        eid: mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, entity_body_name(eid))
        for eid in entity_ids
    }
    return segmentation_labels(env.model, entity_ids, bodies)


def task_source(env: Any) -> str:
    return str(getattr(env, "deployment_dir", "")) + "/task.yaml"


class CameraRig:
    """The cameras of one task, rendering whatever environment they are given."""

    def __init__(
        self,
        cameras: Sequence[CameraSpec],
        *,
        backend: str | None = None,
        source: str | None = None,
    ) -> None:
        self.cameras = tuple(cameras)
        self.backend = backend
        self.source = source
        self._renderer: RemoteRenderer | None = None
        self._strides: dict[str, int] = {}

    def validate(self, env: Any) -> dict[str, int]:
        """Frame strides for ``env``; a ``ConfigError`` naming the field when it cannot work."""
        source = self.source or task_source(env)
        strides = frame_strides(self.cameras, control_rate_hz(env), source)
        mount_bodies(self.cameras, env.model, source)
        return strides

    def renderer_for(self, env: Any) -> RemoteRenderer:
        if self._renderer is None or self._renderer.model is not env.model:
            self.close()
            self._strides = self.validate(env)
            bodies = mount_bodies(self.cameras, env.model)
            self._renderer = RemoteRenderer(
                env.model, self.cameras, environment_labels(env), bodies, backend=self.backend
            )
        return self._renderer

    def strides(self, env: Any) -> dict[str, int]:
        self.renderer_for(env)
        return dict(self._strides)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __enter__(self) -> CameraRig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_task_cameras(
    task: Any, base_dir: Path, *, source: str | None = None, backend: str | None = None
) -> None:
    """Build the task's scene once and check its cameras against it, and that a GL backend
    works here, so a camera that cannot record (unknown mount body, fps not dividing the
    control rate, no backend) is refused with one line before a run records anything. The
backend is probed in the render process: this one never creates a GL context."""
    if not task.cameras:
        return
    from runtime.sim.cameras.render_server import check_backend
    from runtime.sim.environment import TaskEnvironment

    check_backend(backend, max_pixels=max(c.width * c.height for c in task.cameras))
    env = TaskEnvironment(task, Path(base_dir))
    try:
        CameraRig(task.cameras, backend=backend, source=source).validate(env)
    finally:
        env.close()
