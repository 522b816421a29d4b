"""Episode trajectories: T+1 observations, T actions, and a durable, byte-stable file.

The payload is a flat dict of float64 tensors plus one canonical-JSON metadata
string, so ``torch.save`` of the same episode gives the same bytes (verified by the
tests): nothing in it depends on object identity, time or dict order. An accepted
episode is committed atomically (temp file, fsync, rename, directory fsync); a
discarded one never reaches the disk. Which arrays an episode holds depends on the
robot (an arm adds joint-space state, end-effector pose and two action
representations); the metadata names every column and its unit.
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
_COMMON_OBSERVATION_KEYS = ("robot_qpos", "robot_qvel", "entity_pose", "finger_width")


class TrajectoryRecorder:
    """Collects one episode sampled at the control rate (every ``CONTROL_DECIMATION`` steps).

    ``columns`` maps every recorded key (observations, ``timestamps`` and actions) to its
    column names and units; keys of an observation or action not in ``columns`` are an error,
    so nothing unnamed reaches a file.
    """

    def __init__(
        self,
        entity_ids: Sequence[str],
        joint_names: Sequence[str],
        columns: Mapping[str, Any] | None = None,
    ) -> None:
        self.entity_ids = tuple(entity_ids)
        self.joint_names = tuple(joint_names)
        self.columns = dict(columns or {})
        self._observations: dict[str, list[np.ndarray]] = {}
        self._times: list[float] = []
        self._actions: dict[str, list[np.ndarray]] = {}

    @classmethod
    def for_environment(cls, env: Any) -> TrajectoryRecorder:
        return cls(env.order, env.robot.joint_names, env.record_columns())

    @property
    def num_actions(self) -> int:
        return len(self._actions.get("actions", ()))

    def begin(self, observation: Mapping[str, np.ndarray]) -> None:
        """The first observation (before any action); clears anything recorded before."""
        keys = [k for k in observation if k != "time"]
        missing = [k for k in _COMMON_OBSERVATION_KEYS if k not in observation]
        if missing:
            raise ValueError(f"observation lacks {', '.join(missing)}")
        self._observations = {k: [] for k in keys}
        self._times.clear()
        self._actions = {}
        self._observe(observation)

    def record(
        self, action: Mapping[str, np.ndarray] | np.ndarray, observation: Mapping[str, np.ndarray]
    ) -> None:
        """One control interval: the action(s) applied and the observation that followed."""
        if not self._times:
            raise RuntimeError("record() before begin(): the initial observation is missing")
        actions = action if isinstance(action, Mapping) else {"actions": action}
        if not self._actions:
            self._actions = {k: [] for k in actions}
        for key, values in self._actions.items():
            values.append(np.array(actions[key], dtype=np.float64))
        self._observe(observation)

    def _observe(self, observation: Mapping[str, np.ndarray]) -> None:
        for key, values in self._observations.items():
            values.append(np.array(observation[key], dtype=np.float64))
        self._times.append(float(observation["time"]))

    def _column_meta(self, keys: Sequence[str]) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        for key in keys:
            column = self.columns.get(key)
            if column is not None:
                meta[key] = column.to_dict() if hasattr(column, "to_dict") else dict(column)
        return meta

    def to_payload(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Tensors plus a canonical JSON metadata string (task, batch, episode, seed, assets...)."""
        if not self._times:
            raise RuntimeError("nothing recorded: call begin() first")
        payload: dict[str, Any] = {
            key: torch.from_numpy(np.stack(values)) for key, values in self._observations.items()
        }
        action_keys = list(self._actions) or ["actions"]
        for key in action_keys:
            values = self._actions.get(key, [])
            if values:
                payload[key] = torch.from_numpy(np.stack(values))
            else:
                column = self.columns.get(key)
                width = len(column.names) if column is not None else len(self.joint_names)
                payload[key] = torch.from_numpy(np.zeros((0, width)))
        payload["timestamps"] = torch.tensor(self._times, dtype=torch.float64)
        meta = {
            "schema_version": PAYLOAD_SCHEMA_VERSION,
            "entity_ids": list(self.entity_ids),
            "joint_names": list(self.joint_names),
            "samples": len(self._times),
            "actions": self.num_actions,
            "columns": self._column_meta(sorted(payload)),
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
