"""The ``cameras:`` section of a task file: what each camera sees, how often and at what size.

A camera is either *fixed* in the world (``position_m`` plus ``look_at_m`` or ``quat_wxyz``)
or *mounted* on a body of the compiled scene (``mount: {body, position_m, ...}``, the pose
given in that body's frame), which is how a wrist camera follows the hand of any robot.
Everything that can be checked without the simulator is checked here, with the dotted path
of the offending value; what needs the compiled model (does the mount body exist, does
``fps`` divide the control rate) is checked by ``runtime.sim.cameras`` before a run records
anything.

Camera frame convention (MuJoCo's): the camera looks along its -Z axis, +Y is up in the
image and +X points right. ``quat_wxyz`` rotates that frame into the parent frame.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from domain import fields as f

MODALITIES: tuple[str, ...] = ("rgb", "depth", "segmentation")
MAX_RESOLUTION = 2048
DEFAULT_FOVY_DEG = 45.0
DEFAULT_UP = (0.0, 0.0, 1.0)
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_POSE_KEYS = ("position_m", "look_at_m", "quat_wxyz", "up")


@dataclass(frozen=True)
class CameraPose:
    """A camera pose in a parent frame: position plus either a look-at point or a quaternion.

    ``up`` only matters with ``look_at_m``: it fixes the roll (the image's up direction is
    the projection of ``up``)."""

    position_m: tuple[float, float, float]
    look_at_m: tuple[float, float, float] | None = None
    quat_wxyz: tuple[float, float, float, float] | None = None
    up: tuple[float, float, float] = DEFAULT_UP

    def orientation(self) -> tuple[float, float, float, float]:
        """Unit quaternion (w, x, y, z) of the camera frame in the parent frame."""
        if self.quat_wxyz is not None:
            return self.quat_wxyz
        assert self.look_at_m is not None
        forward = _normalized(_sub(self.look_at_m, self.position_m))
        right = _normalized(_cross(forward, self.up))
        up = _cross(right, forward)
        back = (-forward[0], -forward[1], -forward[2])
        return _quat_from_axes(right, up, back)


@dataclass(frozen=True)
class CameraSpec:
    """One camera. ``mount`` is None for a camera fixed in the world frame."""

    name: str
    pose: CameraPose
    mount: str | None
    fovy_deg: float
    width: int
    height: int
    modalities: tuple[str, ...]
    fps: int

    @property
    def mounted(self) -> bool:
        return self.mount is not None


# --------------------------------------------------------------------------- vector helpers


def _sub(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, float, float]:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _cross(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, float, float]:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _norm(a: tuple[float, ...]) -> float:
    return math.sqrt(sum(x * x for x in a))


def _normalized(a: tuple[float, ...]) -> tuple[float, float, float]:
    n = _norm(a)
    return (a[0] / n, a[1] / n, a[2] / n)


def _quat_from_axes(
    x: tuple[float, float, float], y: tuple[float, float, float], z: tuple[float, float, float]
) -> tuple[float, float, float, float]:
    """Quaternion of the rotation whose matrix has columns x, y, z (Shepperd's method)."""
    m00, m01, m02 = x[0], y[0], z[0]
    m10, m11, m12 = x[1], y[1], z[1]
    m20, m21, m22 = x[2], y[2], z[2]
    trace = m00 + m11 + m22
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = (0.25 * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s)
    elif m00 > m11 and m00 > m22:
        s = 2.0 * math.sqrt(1.0 + m00 - m11 - m22)
        q = ((m21 - m12) / s, 0.25 * s, (m01 + m10) / s, (m02 + m20) / s)
    elif m11 > m22:
        s = 2.0 * math.sqrt(1.0 + m11 - m00 - m22)
        q = ((m02 - m20) / s, (m01 + m10) / s, 0.25 * s, (m12 + m21) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m22 - m00 - m11)
        q = ((m10 - m01) / s, (m02 + m20) / s, (m12 + m21) / s, 0.25 * s)
    n = _norm(q)
    w, qx, qy, qz = (c / n for c in q)
    return (w, qx, qy, qz) if w >= 0 else (-w, -qx, -qy, -qz)


# --------------------------------------------------------------------------- parsing


def _vector3(value: Any, path: str, source: str | None) -> tuple[float, float, float]:
    x, y, z = f.numbers(value, path, source, arity=3)
    return (x, y, z)


def _parse_pose(raw: Any, path: str, source: str | None) -> CameraPose:
    """``position_m`` and exactly one of ``look_at_m`` / ``quat_wxyz`` (``up`` with look-at)."""
    position = _vector3(raw["position_m"], f.key_path(path, "position_m"), source)
    has_look, has_quat = "look_at_m" in raw, "quat_wxyz" in raw
    if has_look == has_quat:
        f.fail(path, "give exactly one of look_at_m or quat_wxyz", source)
    if has_quat:
        quat_path = f.key_path(path, "quat_wxyz")
        if "up" in raw:
            f.fail(f.key_path(path, "up"), "only meaningful with look_at_m", source)
        quat = f.numbers(raw["quat_wxyz"], quat_path, source, arity=4)
        length = _norm(quat)
        if length < 1e-9:
            f.fail(quat_path, "must not be the zero quaternion", source)
        w, x, y, z = (c / length for c in quat)
        return CameraPose(position, quat_wxyz=(w, x, y, z))
    look_path = f.key_path(path, "look_at_m")
    look_at = _vector3(raw["look_at_m"], look_path, source)
    up_path = f.key_path(path, "up")
    up = _vector3(raw["up"], up_path, source) if "up" in raw else DEFAULT_UP
    forward = _sub(look_at, position)
    if _norm(forward) < 1e-9:
        f.fail(look_path, "must differ from position_m", source)
    if _norm(up) < 1e-9:
        f.fail(up_path, "must not be the zero vector", source)
    if _norm(_cross(_normalized(forward), _normalized(up))) < 1e-6:
        where = up_path if "up" in raw else look_path
        f.fail(where, "the viewing direction is parallel to up; give another up", source)
    return CameraPose(position, look_at_m=look_at, up=up)


def _parse_camera(value: Any, path: str, source: str | None) -> CameraSpec:
    raw = f.mapping(
        value,
        path,
        source,
        required=("name", "width", "height", "modalities", "fps"),
        optional=("position_m", "look_at_m", "quat_wxyz", "up", "mount", "fovy_deg"),
    )
    name = f.text(raw["name"], f.key_path(path, "name"), source)
    if not _NAME.match(name):
        f.fail(
            f.key_path(path, "name"),
            f"{name!r} must be 1-32 of a-z 0-9 _ - (it names files), starting alphanumeric",
            source,
        )
    mount: str | None = None
    if "mount" in raw:
        for key in _POSE_KEYS:
            if key in raw:
                f.fail(f.key_path(path, key), "a mounted camera's pose goes inside mount", source)
        mount_path = f.key_path(path, "mount")
        mount_raw = f.mapping(
            raw["mount"],
            mount_path,
            source,
            required=("body", "position_m"),
            optional=("look_at_m", "quat_wxyz", "up"),
        )
        mount = f.text(mount_raw["body"], f.key_path(mount_path, "body"), source)
        pose = _parse_pose(mount_raw, mount_path, source)
    else:
        if "position_m" not in raw:
            f.fail(
                f.key_path(path, "position_m"), "required key is missing (or give mount)", source
            )
        pose = _parse_pose(raw, path, source)
    fovy = f.number(
        raw.get("fovy_deg", DEFAULT_FOVY_DEG), f.key_path(path, "fovy_deg"), source, positive=True
    )
    if not fovy < 180.0:
        f.fail(f.key_path(path, "fovy_deg"), f"must be < 180, got {fovy!r}", source)
    size = {
        key: f.integer(raw[key], f.key_path(path, key), source, lower=1, upper=MAX_RESOLUTION)
        for key in ("width", "height")
    }
    modalities_path = f.key_path(path, "modalities")
    modalities = f.text_list(raw["modalities"], modalities_path, source)
    if not modalities:
        f.fail(modalities_path, f"at least one of {', '.join(MODALITIES)} is required", source)
    for i, modality in enumerate(modalities):
        if modality not in MODALITIES:
            f.fail(
                f.index_path(modalities_path, i),
                f"unknown modality {modality!r}; expected one of {', '.join(MODALITIES)}",
                source,
            )
    if "rgb" in modalities:
        for key in ("width", "height"):
            if size[key] % 2:
                f.fail(
                    f.key_path(path, key),
                    f"must be even for rgb (H.264 stores colour at half resolution), "
                    f"got {size[key]}",
                    source,
                )
    fps = f.integer(raw["fps"], f.key_path(path, "fps"), source, lower=1, upper=1000)
    return CameraSpec(
        name=name,
        pose=pose,
        mount=mount,
        fovy_deg=fovy,
        width=size["width"],
        height=size["height"],
        modalities=tuple(m for m in MODALITIES if m in modalities),
        fps=fps,
    )


def parse_cameras(value: Any, path: str, source: str | None) -> tuple[CameraSpec, ...]:
    """The ``cameras:`` list; names are unique (they name the frame files)."""
    items = f.sequence(value, path, source)
    cameras = tuple(
        _parse_camera(item, f.index_path(path, i), source) for i, item in enumerate(items)
    )
    seen: set[str] = set()
    for i, camera in enumerate(cameras):
        if camera.name in seen:
            f.fail(
                f.key_path(f.index_path(path, i), "name"),
                f"duplicate camera name {camera.name!r}",
                source,
            )
        seen.add(camera.name)
    return cameras


# --------------------------------------------------------------------------- serializing


def _pose_to_dict(pose: CameraPose) -> dict[str, Any]:
    out: dict[str, Any] = {"position_m": list(pose.position_m)}
    if pose.quat_wxyz is not None:
        out["quat_wxyz"] = list(pose.quat_wxyz)
    else:
        assert pose.look_at_m is not None
        out["look_at_m"] = list(pose.look_at_m)
        if pose.up != DEFAULT_UP:
            out["up"] = list(pose.up)
    return out


def camera_to_dict(camera: CameraSpec) -> dict[str, Any]:
    """The task-file mapping of one camera; ``parse_cameras([camera_to_dict(c)])[0] == c``."""
    out: dict[str, Any] = {"name": camera.name}
    if camera.mount is not None:
        out["mount"] = {"body": camera.mount, **_pose_to_dict(camera.pose)}
    else:
        out.update(_pose_to_dict(camera.pose))
    out.update(
        {
            "fovy_deg": camera.fovy_deg,
            "width": camera.width,
            "height": camera.height,
            "modalities": list(camera.modalities),
            "fps": camera.fps,
        }
    )
    return out
