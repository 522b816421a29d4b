"""Loading what a deployment's task names: its task file and each entity's collision geometry.

Shared by building an environment and by swapping its role bodies, which must load entities
exactly alike for a replaced environment to step bit for bit like one built fresh.
"""

from __future__ import annotations

from pathlib import Path

from domain.task import EntitySpec, PackageAsset, TaskSpec
from runtime.sim.errors import SceneBuildError
from runtime.sim.geometry import EntityGeometry, package_geometry, primitive_geometry


def load_entity_geometry(task: TaskSpec, entity: EntitySpec, base_dir: Path) -> EntityGeometry:
    density = task.scene.physics.density_kg_m3
    if isinstance(entity.asset, PackageAsset):
        return package_geometry(entity.entity_id, base_dir / entity.asset.package, density)
    return primitive_geometry(
        entity.entity_id, entity.asset.primitive, entity.asset.size_m, density
    )


def deployment_task_path(deployment_dir: Path) -> Path:
    """The deployment's ``task.yaml``; a deployment without one is refused by name."""
    path = Path(deployment_dir) / "task.yaml"
    if not path.is_file():
        raise SceneBuildError(f"{path}: deployment has no task.yaml")
    return path
