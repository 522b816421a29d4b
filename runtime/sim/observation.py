"""What an environment's simulated state looks like: poses, contacts, recorded observations.

Read-only views over ``model``/``data`` (except the forward or kinematics pass some views
need), used by the skills, the checks and the recorder. Mixed into
:class:`runtime.sim.environment.TaskEnvironment`, whose ``_compile`` builds the index arrays
read here (qpos/qvel addresses of the robot's joints and of every entity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from runtime.sim import physics_state
from runtime.sim import scene as sc
from runtime.sim.geometry import EntityGeometry, rotation_from_quat
from runtime.sim.robots import Column, Robot


class EnvironmentObservation:
    """Observation methods; the attributes below are set by the environment's build."""

    model: Any
    data: Any
    robot: Robot
    order: list[str]
    roles: dict[str, str]
    geometries: dict[str, EntityGeometry]
    _robot_qpos: np.ndarray
    _robot_dof: np.ndarray
    _robot_angular: np.ndarray
    _fingers: np.ndarray
    _entity_qpos: dict[str, int]
    _entity_dof: dict[str, int]
    _entity_body: dict[str, int]
    _entity_pose_qpos: np.ndarray
    _finger_geoms: tuple[frozenset[int], ...]

    def entity_pose(self, entity_id: str) -> tuple[np.ndarray, np.ndarray]:
        """World position of the entity frame (bottom centre) and its rotation matrix."""
        adr = self._entity_qpos[entity_id]
        qpos = self.data.qpos
        return qpos[adr : adr + 3].copy(), rotation_from_quat(qpos[adr + 3 : adr + 7])

    def entity_velocity(self, entity_id: str) -> tuple[np.ndarray, np.ndarray]:
        adr = self._entity_dof[entity_id]
        return self.data.qvel[adr : adr + 3].copy(), self.data.qvel[adr + 3 : adr + 6].copy()

    def entity_world_points(self, entity_id: str) -> np.ndarray:
        pos, rot = self.entity_pose(entity_id)
        return sc.world_points(self.geometries[entity_id], pos, rot)

    def entity_world_aabb(self, entity_id: str) -> tuple[np.ndarray, np.ndarray]:
        points = self.entity_world_points(entity_id)
        return points.min(axis=0), points.max(axis=0)

    def to_entity_frame(self, entity_id: str, points: np.ndarray) -> np.ndarray:
        pos, rot = self.entity_pose(entity_id)
        return (points - pos) @ rot

    def to_world(self, entity_id: str, local: np.ndarray) -> np.ndarray:
        pos, rot = self.entity_pose(entity_id)
        return np.asarray(local) @ rot.T + pos

    @property
    def layout(self) -> Robot:
        """The robot's gripper dimensions (``max_opening_m``, ``finger_length_m``)."""
        return self.robot

    def finger_width(self) -> float:
        return float(np.sum(self.data.qpos[self._fingers]))

    def tcp(self) -> np.ndarray:
        """Where the TCP is (x, y, z, yaw, tilt), from the simulated state."""
        return self.robot.tcp_pose(self.data, self.data.qpos[self._robot_qpos]).as_array()

    def robot_qpos(self) -> np.ndarray:
        return self.data.qpos[self._robot_qpos]

    def gripper_points(self) -> np.ndarray:
        """Points on every collision geom that turns with the gripper (the subtree of the
        robot's tilting body): a mesh's vertices, a primitive's 5x5x5 grid over its box (a
        grid, not corners, so what is over a target can be told from what is not). What a
        tilting motion must keep clear of the scene."""
        m, d = self.model, self.data
        mujoco.mj_kinematics(m, d)
        root = m.body(self.robot.tilting_body or self.robot.wrist_mount_body).id
        bodies = {root}
        for body in range(root + 1, m.nbody):
            if int(m.body_parentid[body]) in bodies:
                bodies.add(body)
        steps = np.linspace(-1.0, 1.0, 5)
        signs = np.array([[x, y, z] for x in steps for y in steps for z in steps])
        corners = []
        for geom in range(m.ngeom):
            if int(m.geom_bodyid[geom]) not in bodies or not (m.geom_contype[geom] or
                                                              m.geom_conaffinity[geom]):
                continue
            mesh = int(m.geom_dataid[geom])
            if m.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH and mesh >= 0:
                start = int(m.mesh_vertadr[mesh])
                local = m.mesh_vert[start : start + int(m.mesh_vertnum[mesh])]
            else:
                centre, half = m.geom_aabb[geom][:3], m.geom_aabb[geom][3:]
                local = centre + signs * half
            corners.append(local @ d.geom_xmat[geom].reshape(3, 3).T + d.geom_xpos[geom])
        return np.concatenate(corners) if corners else np.zeros((0, 3))

    def finger_contacts(self, entity_id: str) -> tuple[int, int]:
        """Active contacts between the entity and each finger (left, right)."""
        mujoco.mj_forward(self.model, self.data)
        d, m = self.data, self.model
        body = self._entity_body[entity_id]
        counts = [0, 0]
        for i in range(d.ncon):
            g1, g2 = int(d.contact.geom1[i]), int(d.contact.geom2[i])
            if m.geom_bodyid[g1] == body:
                other = g2
            elif m.geom_bodyid[g2] == body:
                other = g1
            else:
                continue
            for side, geoms in enumerate(self._finger_geoms):
                if other in geoms:
                    counts[side] += 1
        return counts[0], counts[1]

    def observation(self) -> dict[str, np.ndarray]:
        """The state recorded every control interval (index arrays gather fresh copies)."""
        d = self.data
        return {
            "robot_qpos": d.qpos[self._robot_qpos],
            "robot_qvel": d.qvel[self._robot_dof],
            "entity_pose": d.qpos[self._entity_pose_qpos],
            "finger_width": np.array(self.finger_width()),
            "time": np.array(d.time),
            **self.robot.extra_observation(d, d.qpos[self._robot_qpos], d.qvel[self._robot_dof]),
            physics_state.KEY: physics_state.capture(self.model, d),
        }

    def record_columns(self) -> dict[str, Column]:
        """Names and units of every recorded array (stored in the trajectory metadata)."""
        joint_units = [("rad" if i in self._robot_angular else "m") for i in range(
            len(self.robot.joint_names))]
        speed_units = [u + "/s" for u in joint_units]
        pose = ("x", "y", "z", "qw", "qx", "qy", "qz")
        columns = {
            "robot_qpos": Column(self.robot.joint_names, tuple(joint_units)),
            "robot_qvel": Column(self.robot.joint_names, tuple(speed_units)),
            "entity_pose": Column(
                tuple(f"{e}.{p}" for e in self.order for p in pose),
                tuple(u for _ in self.order for u in ("m",) * 3 + ("1",) * 4),
            ),
            "finger_width": Column(("finger_width",), ("m",)),
            "timestamps": Column(("time",), ("s",)),
            "actions": Column(self.robot.actuator_names, tuple(joint_units)),
            physics_state.KEY: Column(
                physics_state.names(self.model),
                physics_state.units(physics_state.names(self.model)),
            ),
        }
        columns.update(self.robot.extra_columns())
        return columns

    def asset_identities(self) -> dict[str, dict[str, Any]]:
        """Role -> entity, asset id and content digest of the bodies currently in the scene."""
        return {
            role: {
                "entity_id": eid,
                "asset_id": self.geometries[eid].asset_id,
                "content_sha256": self.geometries[eid].content_sha256,
            }
            for role, eid in self.roles.items()
        }

    def contacts(self) -> list[Mapping[str, Any]]:
        """Active contacts after the last forward pass: geom names and signed distance."""
        d, m = self.data, self.model
        return [
            {
                "geom1": m.geom(int(d.contact.geom1[i])).name,
                "geom2": m.geom(int(d.contact.geom2[i])).name,
                "dist": float(d.contact.dist[i]),
            }
            for i in range(d.ncon)
        ]
