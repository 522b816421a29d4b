"""The ``cameras:`` section: strict errors naming the path, orientation, round trip."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from domain.cameras import CameraPose
from domain.errors import ConfigError
from domain.task import parse_task, task_to_dict
from tests.domain.test_task import SOURCE, base


def front(**changes: Any) -> dict[str, Any]:
    camera = {
        "name": "front",
        "position_m": [0.0, -0.5, 0.4],
        "look_at_m": [0.0, 0.0, 0.0],
        "fovy_deg": 45,
        "width": 128,
        "height": 96,
        "modalities": ["segmentation", "rgb"],
        "fps": 10,
    }
    camera.update(changes)
    return camera


def wrist() -> dict[str, Any]:
    return {
        "name": "wrist",
        "mount": {"body": "hand", "position_m": [0, 0, 0.1], "quat_wxyz": [0, 1, 0, 0]},
        "width": 64,
        "height": 64,
        "modalities": ["depth"],
        "fps": 5,
    }


def task_with(*cameras: dict[str, Any]) -> dict[str, Any]:
    return {**base(), "cameras": list(cameras)}


def error_of(*cameras: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_task(task_with(*cameras), source=SOURCE)
    return str(caught.value)


def test_cameras_parse_and_round_trip() -> None:
    spec = parse_task(task_with(front(), wrist()), source=SOURCE)
    first, second = spec.cameras
    assert first.mount is None and second.mount == "hand"
    assert first.modalities == ("rgb", "segmentation")  # canonical order
    assert second.fovy_deg == 45.0 and second.pose.quat_wxyz == (0.0, 1.0, 0.0, 0.0)
    assert parse_task(task_to_dict(spec), source=SOURCE) == spec


def test_a_task_without_cameras_has_none_and_writes_none() -> None:
    spec = parse_task(base(), source=SOURCE)
    assert spec.cameras == () and "cameras" not in task_to_dict(spec)


def test_look_at_points_the_camera_minus_z_at_the_target() -> None:
    pose = CameraPose((0.0, -0.5, 0.4), look_at_m=(0.0, 0.0, 0.0))
    w, x, y, z = pose.orientation()
    rotation = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    forward = -rotation[:, 2]
    expected = np.array([0.0, 0.5, -0.4]) / math.hypot(0.5, 0.4)
    assert np.allclose(forward, expected)
    assert rotation[2, 1] > 0  # image up has a world +Z component
    assert abs(rotation[2, 0]) < 1e-12  # no roll: image x stays horizontal


@pytest.mark.parametrize(
    ("camera", "message"),
    [
        (
            front(modalities=["rgb", "thermal"]),
            "cameras[0].modalities[1]: unknown modality 'thermal'; expected one of rgb, depth, "
            "segmentation",
        ),
        (front(width=4096), "cameras[0].width: must be an integer in [1, 2048], got 4096"),
        (front(height=0), "cameras[0].height: must be an integer in [1, 2048], got 0"),
        (
            front(width=127),
            "cameras[0].width: must be even for rgb (H.264 stores colour at half resolution), "
            "got 127",
        ),
        (front(fps=0), "cameras[0].fps: must be an integer in [1, 1000], got 0"),
        (front(fps=2.5), "cameras[0].fps: expected an integer, got float"),
        (front(zoom=2), "cameras[0].zoom: unknown key"),
        (front(fovy_deg=180), "cameras[0].fovy_deg: must be < 180, got 180.0"),
        (front(name="Front Cam"), "cameras[0].name: 'Front Cam' must be 1-32 of a-z 0-9 _ - "
         "(it names files), starting alphanumeric"),
        (front(quat_wxyz=[1, 0, 0, 0]), "cameras[0]: give exactly one of look_at_m or quat_wxyz"),
        (front(look_at_m=[0.0, -0.5, 0.4]), "cameras[0].look_at_m: must differ from position_m"),
        (
            front(look_at_m=[0.0, -0.5, 0.0]),
            "cameras[0].look_at_m: the viewing direction is parallel to up; give another up",
        ),
        (front(modalities=[]), "cameras[0].modalities: at least one of rgb, depth, segmentation "
         "is required"),
    ],
)
def test_bad_camera_fields_name_their_path(camera: dict[str, Any], message: str) -> None:
    assert error_of(camera) == f"{SOURCE}: {message}"


def test_mounted_camera_pose_lives_inside_mount() -> None:
    camera = {**wrist(), "position_m": [0, 0, 1]}
    assert error_of(camera) == (
        f"{SOURCE}: cameras[0].position_m: a mounted camera's pose goes inside mount"
    )
    camera = wrist()
    del camera["mount"]["body"]
    assert error_of(camera) == f"{SOURCE}: cameras[0].mount.body: required key is missing"


def test_duplicate_camera_names_are_refused() -> None:
    assert error_of(front(), front()) == (
        f"{SOURCE}: cameras[1].name: duplicate camera name 'front'"
    )
