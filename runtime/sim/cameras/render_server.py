"""The cameras' renderer in its own process, so frames render beside the physics, not after it.

Rendering here is Mesa's CPU rasterizer. In a thread of the collecting process it shared the
GIL with the physics and the skills' Python (inverse kinematics, checks), and each slowed the
other; in a separate process the two run on the two cores for real. The process is a fresh
interpreter (``python .../render_process.py FD``, which skips the simulator's imports and
starts in ~0.2 s; it never inherits an OpenGL context, imports nothing of the caller's
``__main__``, and the collecting process never creates a context, so that one stays safe to
fork), started once per collecting process on first use, talking over a socket pair with
``multiprocessing``'s framing; it serves
every rig of that process: ``RemoteRenderer`` sends it the compiled model once (an ``MjModel``
pickles as its binary form), then only joint positions.

Protocol (pickled tuples), in order:
``open`` a renderer for a model, ``begin`` an episode, ``sample`` (no reply: the recorder does
not wait) for every noted sample, ``finish`` (reply: every camera's frames, poses and its
finished H.264 video), ``render`` one frame now, ``culling``, ``close``, ``backend`` (choose and
probe the GL backend there; its error comes back with its type). An error while rendering a
sample is kept and raised at ``finish``. If the collecting process dies, the pipe closes and
the server exits.
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from domain.cameras import CameraSpec
from runtime.child_process import ChildProcess
from runtime.sim.cameras.labels import SegmentationLabels
from runtime.sim.cameras.rendering import CameraFrame, camera_pose


class RenderServerDied(RuntimeError):
    """The render process is gone (killed, or crashed in the GL driver)."""


# ---------------------------------------------------------------------------- server side


@dataclass
class _CameraTake:
    images: dict[str, list[np.ndarray]]
    positions: list[np.ndarray] = field(default_factory=list)
    quats: list[np.ndarray] = field(default_factory=list)
    encoder: Any = None


class _Slot:
    """One model's renderer in the server, and the episode it is recording."""

    def __init__(self, model: mujoco.MjModel, cameras: Sequence[CameraSpec],
                 labels: SegmentationLabels, mount_bodies: dict[str, int],
                 backend: str | None) -> None:
        from runtime.sim.cameras.rendering import CameraRenderer

        self.model = model
        self.cameras = {c.name: c for c in cameras}
        self.renderer = CameraRenderer(model, cameras, labels, mount_bodies, backend=backend)
        self.data = mujoco.MjData(model)
        self.takes: dict[str, _CameraTake] = {}
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.frames = 0

    def _pose_data(self, qpos: np.ndarray) -> mujoco.MjData:
        data = self.data
        data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, data)
        mujoco.mj_comPos(self.model, data)
        mujoco.mj_camlight(self.model, data)
        return data

    def begin(self) -> None:
        for take in self.takes.values():
            if take.encoder is not None:
                take.encoder.close()
        self.takes = {
            name: _CameraTake({m: [] for m in camera.modalities})
            for name, camera in self.cameras.items()
        }
        self.error = None
        self.seconds, self.frames = 0.0, 0

    def sample(self, qpos: np.ndarray, due: Sequence[str]) -> None:
        from runtime.sim.cameras.encoding import Mp4Encoder

        if self.error is not None:
            return
        try:
            start = time.perf_counter()
            data = self._pose_data(qpos)
            for name in due:
                camera = self.cameras[name]
                frame = self.renderer.render(data, camera)
                take = self.takes[name]
                for modality, image in frame.images.items():
                    take.images[modality].append(image)
                take.positions.append(frame.position_m)
                take.quats.append(frame.quat_wxyz)
                if "rgb" in frame.images:
                    if take.encoder is None:
                        take.encoder = Mp4Encoder(camera.fps, camera.width, camera.height)
                    take.encoder.add(frame.images["rgb"])
                self.frames += 1
            self.seconds += time.perf_counter() - start
        except Exception as error:  # kept and raised at finish, with its type
            self.error = error

    def finish(self) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        cameras = {}
        for name, take in self.takes.items():
            encoded = {"rgb": take.encoder.finish()} if take.encoder is not None else {}
            take.encoder = None
            cameras[name] = {
                "images": {m: np.stack(v) if v else None for m, v in take.images.items()},
                "positions": take.positions,
                "quats": take.quats,
                "encoded": encoded,
            }
        return {"cameras": cameras, "seconds": self.seconds, "frames": self.frames}

    def close(self) -> None:
        self.begin()
        self.renderer.close()


def serve(connection: Any) -> None:
    """The server loop (in the render process) until ``stop`` or the pipe closes."""
    slots: dict[int, _Slot] = {}
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            break  # the collecting process is gone
        kind, slot_id, *args = message
        if kind == "sample":
            slots[slot_id].sample(*args)
            continue
        if kind == "stop":
            break
        try:
            if kind == "backend":
                from runtime.sim.cameras.backend import ensure_backend

                explicit, max_pixels = args
                reply: Any = ensure_backend(explicit, max_pixels=max_pixels)
            elif kind == "open":
                slots[slot_id] = _Slot(*args)
                reply = None
            elif kind == "begin":
                slots[slot_id].begin()
                reply = None
            elif kind == "finish":
                reply = slots[slot_id].finish()
            elif kind == "render":
                slot = slots[slot_id]
                qpos, name = args
                reply = slot.renderer.render(slot._pose_data(qpos), slot.cameras[name])
            elif kind == "culling":
                slots[slot_id].renderer.culling = bool(args[0])
                reply = None
            elif kind == "close":
                slot = slots.pop(slot_id, None)
                if slot is not None:
                    slot.close()
                reply = None
            else:
                raise ValueError(f"render server: unknown request {kind!r}")
            connection.send(("ok", reply))
        except Exception as error:  # the caller re-raises it, type and message kept
            try:
                connection.send(("error", error))
            except Exception:
                connection.send(("error", RuntimeError(f"{type(error).__name__}: {error}")))
    for slot in slots.values():
        slot.close()


# ---------------------------------------------------------------------------- client side


class RenderServer:
    """The handle of this process's render server (``server()`` starts it on first use)."""

    def __init__(self) -> None:
        self._child = ChildProcess(
            Path(__file__).with_name("render_process.py"), what="camera render",
            died=RenderServerDied, quiet=True,
        )
        self.process = self._child.process
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def alive(self) -> bool:
        return self._child.alive()

    def new_id(self) -> int:
        return next(self._ids)

    def post(self, *message: Any) -> None:
        with self._lock:
            self._child.send(message)

    def call(self, *message: Any) -> Any:
        with self._lock:
            self._child.send(message)
            status, value = self._child.recv()
        if status == "error":
            raise value
        return value

    def stop(self) -> None:
        try:
            with self._lock:
                self._child.send(("stop", 0))
        except RenderServerDied:
            pass
        self._child.close(5.0)


_server: RenderServer | None = None
_server_pid: int | None = None
_server_lock = threading.Lock()


def server() -> RenderServer:
    """This process's render server, started (spawn) on first use or after it died."""
    global _server, _server_pid
    with _server_lock:
        alive = _server is not None and _server_pid == os.getpid() and _server.alive()
        if not alive:
            _server = RenderServer()
            _server_pid = os.getpid()
        assert _server is not None
        return _server


def _stop_server() -> None:
    if _server is not None and _server_pid == os.getpid():
        _server.stop()


atexit.register(_stop_server)


def check_backend(explicit: str | None = None, *, max_pixels: int | None = None) -> str:
    """Choose and probe the GL backend in the render process (one-line error if none);
    ``max_pixels``: the largest camera image (chooses llvmpipe's threads, see backend)."""
    return str(server().call("backend", 0, explicit, max_pixels))


class RemoteRenderer:
    """A task's cameras on one compiled model, rendered by the render server."""

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
        self.mount_bodies = dict(mount_bodies)
        self._server = server()
        self._id = self._server.new_id()
        self._server.call("open", self._id, model, self.cameras, labels, self.mount_bodies,
                          backend)
        self._closed = False
        self._culling = True

    def pose(self, camera: CameraSpec, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        return camera_pose(camera, data, self.mount_bodies.get(camera.name))

    def render(self, data: mujoco.MjData, camera: CameraSpec) -> CameraFrame:
        """One frame of ``camera`` at ``data.qpos`` (kinematics recomputed there)."""
        return self._server.call("render", self._id, np.array(data.qpos), camera.name)

    def begin(self) -> None:
        self._server.call("begin", self._id)

    def sample(self, qpos: np.ndarray, due: Sequence[str]) -> None:
        self._server.post("sample", self._id, np.asarray(qpos), tuple(due))

    def finish(self) -> dict[str, Any]:
        return self._server.call("finish", self._id)

    @property
    def culling(self) -> bool:
        return self._culling

    @culling.setter
    def culling(self, value: bool) -> None:
        self._server.call("culling", self._id, bool(value))
        self._culling = bool(value)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._server.call("close", self._id)
        except RenderServerDied:
            pass
