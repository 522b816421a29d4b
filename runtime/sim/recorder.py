"""Episode trajectories: T+1 observations, T actions, and a durable, byte-stable file.

The payload is a flat dict of float64 tensors plus one canonical-JSON metadata
string, so ``torch.save`` of the same episode gives the same bytes (verified by the
tests): nothing in it depends on object identity, time or dict order. An accepted
episode is committed atomically (temp file, fsync, rename, directory fsync); a
discarded one never reaches the disk.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domain.canonical import canonical_json, sha256_hex
from runtime.files import Fence, write_bytes_atomic
from runtime.sim.results import CommitReceipt

PAYLOAD_SCHEMA_VERSION = 1
_OBSERVATION_KEYS = ("robot_qpos", "robot_qvel", "entity_pose", "finger_width")


class TrajectoryRecorder:
    """Collects one episode sampled at the control rate (every ``CONTROL_DECIMATION`` steps)."""

    def __init__(self, entity_ids: Sequence[str], joint_names: Sequence[str]) -> None:
        self.entity_ids = tuple(entity_ids)
        self.joint_names = tuple(joint_names)
        self._observations: dict[str, list[np.ndarray]] = {k: [] for k in _OBSERVATION_KEYS}
        self._times: list[float] = []
        self._actions: list[np.ndarray] = []

    @classmethod
    def for_environment(cls, env: Any) -> TrajectoryRecorder:
        from runtime.sim.scene import ROBOT_JOINTS

        return cls(env.order, ROBOT_JOINTS)

    @property
    def num_actions(self) -> int:
        return len(self._actions)

    def begin(self, observation: Mapping[str, np.ndarray]) -> None:
        """The first observation (before any action); clears anything recorded before."""
        for values in self._observations.values():
            values.clear()
        self._times.clear()
        self._actions.clear()
        self._observe(observation)

    def record(self, action: np.ndarray, observation: Mapping[str, np.ndarray]) -> None:
        """One control interval: the action applied and the observation that followed."""
        if not self._times:
            raise RuntimeError("record() before begin(): the initial observation is missing")
        self._actions.append(np.array(action, dtype=np.float64))
        self._observe(observation)

    def _observe(self, observation: Mapping[str, np.ndarray]) -> None:
        for key in _OBSERVATION_KEYS:
            self._observations[key].append(np.array(observation[key], dtype=np.float64))
        self._times.append(float(observation["time"]))

    def to_payload(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Tensors plus a canonical JSON metadata string (task, batch, episode, seed, assets...)."""
        if not self._times:
            raise RuntimeError("nothing recorded: call begin() first")
        payload: dict[str, Any] = {
            key: torch.from_numpy(np.stack(values)) for key, values in self._observations.items()
        }
        width = len(self.joint_names)
        actions = np.stack(self._actions) if self._actions else np.zeros((0, width))
        payload["actions"] = torch.from_numpy(actions)
        payload["timestamps"] = torch.tensor(self._times, dtype=torch.float64)
        meta = {
            "schema_version": PAYLOAD_SCHEMA_VERSION,
            "entity_ids": list(self.entity_ids),
            "joint_names": list(self.joint_names),
            "samples": len(self._times),
            "actions": len(self._actions),
            **dict(metadata),
        }
        payload["metadata"] = canonical_json(meta)
        return payload


def trajectory_bytes(payload: Mapping[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(dict(payload), buffer)
    return buffer.getvalue()


def commit_trajectory(
    payload: Mapping[str, Any], path: Path | str, *, fence: Fence | None = None
) -> CommitReceipt:
    """Durably write ``payload`` at ``path``; the receipt is only returned after fsync.

    ``fence`` (the collecting session) is checked right before the rename that publishes it.
    """
    data = trajectory_bytes(payload)
    target = Path(path)
    write_bytes_atomic(target, data, fence=fence)
    return CommitReceipt(path=str(target), bytes=len(data), sha256=sha256_hex(data))
