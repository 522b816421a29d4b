"""The fast trajectory reader gives exactly torch.load's arrays, and refuses what it does not
know instead of guessing (the caller then uses torch.load)."""

from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import pytest
import torch

from runtime.export.trajectory_file import UnsupportedTrajectory, load_payload, read_trajectory
from runtime.sim.recorder import TrajectoryRecorder, trajectory_bytes


def _recorded(steps: int) -> bytes:
    rng = np.random.default_rng(steps)
    recorder = TrajectoryRecorder(["item", "bin"], [f"j{i}" for i in range(7)])

    def observation(t: float) -> dict[str, np.ndarray]:
        return {
            "time": np.float64(t),
            "robot_qpos": rng.standard_normal(7),
            "robot_qvel": np.array([0.0, -0.0, 1e-300, -1.5, np.inf, 2.0, 3.0]),
            "entity_pose": rng.standard_normal((2, 7)),
            "finger_width": np.float64(rng.random()),
        }

    recorder.begin(observation(0.0))
    for step in range(steps):
        recorder.record(rng.standard_normal(7), observation((step + 1) * 0.02))
    return trajectory_bytes(recorder.to_payload({"seed": steps}))


def _assert_same_as_torch(data: bytes) -> None:
    fast = read_trajectory(data)
    reference = torch.load(io.BytesIO(data), weights_only=True)
    assert list(fast) == list(reference)
    for key, value in reference.items():
        if isinstance(value, str):
            assert fast[key] == value
            continue
        expected = value.numpy()
        got = fast[key]
        assert (got.dtype, got.shape, got.strides) == (expected.dtype, expected.shape,
                                                      expected.strides)
        assert got.tobytes() == expected.tobytes(), key
        assert not got.flags.writeable and got.flags.c_contiguous  # a shared, verified payload


@pytest.mark.parametrize("steps", [1, 37])
def test_recorded_trajectories_read_exactly_as_torch_load(steps: int) -> None:
    _assert_same_as_torch(_recorded(steps))


def test_an_episode_without_actions_falls_back_to_torch_load() -> None:
    data = _recorded(0)  # a (0, 7) actions tensor: torch.load's numpy view has zero strides
    with pytest.raises(UnsupportedTrajectory, match="empty"):
        read_trajectory(data)
    payload = load_payload(data)
    assert payload["actions"].shape == (0, 7)
    assert payload["actions"].strides == torch.load(
        io.BytesIO(data), weights_only=True)["actions"].numpy().strides


def test_tensors_sharing_a_storage_and_other_dtypes_read_as_torch_load() -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    buffer = io.BytesIO()
    torch.save({"a": base, "row": base[2], "i": torch.arange(5), "b": torch.ones(3) > 0,
                "scalar": torch.tensor(2.5, dtype=torch.float64), "note": "x"}, buffer)
    _assert_same_as_torch(buffer.getvalue())


def test_a_non_contiguous_tensor_is_refused_and_load_payload_falls_back() -> None:
    buffer = io.BytesIO()
    transposed = torch.arange(6, dtype=torch.float64).reshape(2, 3).t()
    torch.save({"t": transposed}, buffer)
    with pytest.raises(UnsupportedTrajectory, match="non-contiguous"):
        read_trajectory(buffer.getvalue())
    fallback = load_payload(buffer.getvalue())["t"]
    assert np.array_equal(fallback, transposed.numpy())
    assert not fallback.flags.writeable


class _Boom:
    def __reduce__(self) -> tuple:
        return (print, ("unpickled code ran",))


def test_a_foreign_global_is_never_called(capsys: pytest.CaptureFixture[str]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"x": _Boom()}, protocol=2))
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
    with pytest.raises(UnsupportedTrajectory, match=r"global .*\.print"):
        read_trajectory(buffer.getvalue())
    with pytest.raises(pickle.UnpicklingError):  # torch.load(weights_only=True) refuses too
        load_payload(buffer.getvalue())
    assert "unpickled code ran" not in capsys.readouterr().out


def test_truncated_and_compressed_files_are_refused() -> None:
    data = _recorded(3)
    with pytest.raises(UnsupportedTrajectory):
        read_trajectory(data[: len(data) // 2])
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(
        buffer, "w", zipfile.ZIP_DEFLATED
    ) as target:
        for name in source.namelist():
            target.writestr(name, source.read(name))
    with pytest.raises(UnsupportedTrajectory, match="compressed"):
        read_trajectory(buffer.getvalue())
