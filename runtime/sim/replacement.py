"""Swapping an environment's role bodies for another deployment's, refusing anything else.

Collection builds the environment once and, per batch, swaps only the role bodies. The
robot, the table and every non-role entity must stay identical, so a replacement deployment
that changes them is refused with `SceneMismatch` *before* the model is touched; a
replacement MuJoCo rejects puts the previous bodies back so the environment stays usable.
Mixed into :class:`runtime.sim.environment.TaskEnvironment`, whose building steps
(``_adopt``, ``_compile``, ``_placements``) it reuses so the rebuilt scene follows the same
canonical order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from domain.task import TaskSpec
from runtime.sim import scene as sc
from runtime.sim.entity_loading import deployment_task_path, load_entity_geometry
from runtime.sim.errors import SceneBuildError, SceneMismatch
from runtime.sim.geometry import EntityGeometry
from runtime.sim.particles import ParticleSet
from runtime.sim.results import ReplacementInfo
from runtime.taskfile import load_task

log = structlog.get_logger(__name__)


class AssetReplacement:
    """``replace_assets`` for an environment built from a deployment."""

    task: TaskSpec
    deployment_dir: Path
    roles: dict[str, str]
    role_order: list[str]
    kept_order: list[str]
    geometries: dict[str, EntityGeometry]
    particles: dict[str, ParticleSet]
    spec: Any
    visual: bool
    replacements: int
    held: str | None
    picked_from: dict[str, tuple[float, float, float]]

    def _check_compatible(self, task: TaskSpec, directory: Path) -> dict[str, EntityGeometry]:
        """Refuse a deployment that changes anything but the role bodies; load its roles."""
        where = f"{directory / 'task.yaml'}"
        if task.task_id != self.task.task_id:
            raise SceneMismatch(
                f"{where}: task_id {task.task_id!r} differs from the environment's "
                f"{self.task.task_id!r}"
            )
        for name in ("table", "robot", "physics"):
            if getattr(task.scene, name) != getattr(self.task.scene, name):
                raise SceneMismatch(
                    f"{where}: scene.{name} differs from the environment's; only role assets "
                    "may change between batches"
                )
        if task.role_entities() != self.roles:
            raise SceneMismatch(f"{where}: asset_requirements roles differ from the environment's")
        new_ids = [e.entity_id for e in task.scene.entities]
        if sorted(new_ids) != sorted(self.order):
            raise SceneMismatch(f"{where}: scene.entities ids differ from the environment's")
        for eid in self.kept_order:
            old, new = self.task.entity(eid), task.entity(eid)
            if (old.position_m, old.yaw_deg) != (new.position_m, new.yaw_deg):
                raise SceneMismatch(f"{where}: non-role entity {eid!r} moved")
            if load_entity_geometry(task, new, directory).identity != self.geometries[eid].identity:
                raise SceneMismatch(f"{where}: non-role entity {eid!r} has a different asset")
        return {
            eid: load_entity_geometry(task, task.entity(eid), directory) for eid in self.role_order
        }

    def replace_assets(self, deployment_dir: Path | str) -> ReplacementInfo:
        """Swap the role bodies for those of ``deployment_dir`` on this same environment."""
        self._require_open()
        directory = Path(deployment_dir)
        task = load_task(deployment_task_path(directory))
        new_roles = self._check_compatible(task, directory)
        old_geometries = dict(self.geometries)
        self._remove_roles()
        geometries = {**{k: old_geometries[k] for k in self.kept_order}, **new_roles}
        previous = (self.task, self.deployment_dir, old_geometries)
        self._adopt(task, directory, geometries)
        self._add_roles()
        try:
            self._compile()
        except SceneBuildError as error:
            # Put the old bodies back so the environment stays usable for the caller.
            self._remove_roles()
            self._adopt(*previous)
            self._add_roles()
            try:
                self._compile()
            except SceneBuildError as restore_error:
                error.add_note(f"restoring the previous role bodies also failed: {restore_error}")
            raise
        self.replacements += 1
        self.held = None
        self.picked_from = {}
        info = ReplacementInfo(
            roles_replaced=tuple(sorted(self.roles)), entities_kept=tuple(self.kept_order)
        )
        log.info("sim.assets_replaced", deployment=str(directory), roles=info.roles_replaced)
        return info

    def _remove_roles(self) -> None:
        for eid in self.role_order:
            sc.remove_entity(self.spec, self.geometries[eid])
            if eid in self.particles:
                sc.remove_particles(self.spec, self.particles[eid])

    def _add_roles(self) -> None:
        sc.add_entities(
            self.spec,
            self._placements(self.role_order),
            visual=self.visual,
            particles=self.particles,
        )
