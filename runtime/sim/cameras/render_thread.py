"""A ``CameraRenderer`` that lives on its own thread, so frames render while physics runs.

Rendering on these machines is Mesa's CPU rasterizer, and MuJoCo releases the GIL inside
``mjr_render``/``mjr_readPixels`` as it does inside ``mj_step``: with the renderer on a
second thread, an episode's frames are drawn on the second core while the first steps the
physics, instead of after it. An OpenGL context is current on one thread at a time, so the
renderer is built, used and freed only on that one thread (a single-worker executor); every
call from elsewhere is handed to it. Work runs in submission order, so what a frame shows
(and every byte of it) is the same as when rendered in line: it depends only on the
``qpos`` it was given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import mujoco

from domain.cameras import CameraSpec
from runtime.sim.cameras.labels import SegmentationLabels
from runtime.sim.cameras.rendering import CameraFrame, CameraRenderer

T = TypeVar("T")


class RenderThread:
    """The cameras of one compiled model, rendered on one dedicated thread."""

    def __init__(
        self,
        model: mujoco.MjModel,
        cameras: Sequence[CameraSpec],
        labels: SegmentationLabels,
        mount_bodies: dict[str, int],
        *,
        backend: str | None = None,
    ) -> None:
        self.model = model
        self.cameras = tuple(cameras)
        self.labels = labels
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="camera-render")
        try:
            self._renderer = self._executor.submit(
                CameraRenderer, model, self.cameras, labels, mount_bodies, backend=backend
            ).result()
        except BaseException:
            self._executor.shutdown(wait=True)
            raise
        self._closed = False

    def submit(self, work: Callable[[CameraRenderer], T]) -> Future[T]:
        """Run ``work(renderer)`` on the render thread, after everything submitted before."""
        return self._executor.submit(work, self._renderer)

    def call(self, work: Callable[[CameraRenderer], T]) -> T:
        return self.submit(work).result()

    def render(self, data: mujoco.MjData, camera: CameraSpec) -> CameraFrame:
        """One frame now (the caller waits; ``data`` is read on the render thread)."""
        return self.call(lambda renderer: renderer.render(data, camera))

    def pose(self, camera: CameraSpec, data: mujoco.MjData) -> Any:
        return self._renderer.pose(camera, data)

    @property
    def culling(self) -> bool:
        return self._renderer.culling

    @culling.setter
    def culling(self, value: bool) -> None:
        self.call(lambda renderer: setattr(renderer, "culling", value))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.call(lambda renderer: renderer.close())
        finally:
            self._executor.shutdown(wait=True)
