"""Packages of scene entities that are not roles (a table fixture, a shelf).

They are assets like any other: the path the task names must stay inside the task file's
folder (no ``..``, no absolute path, no symlink on the way: ``runtime.inputs.paths``), the
folder must be a real package (manifest, formats, references, sizes), and what a deployment
carries is that package's verified snapshot, never whatever else lies beside it.
``check_entity_packages`` runs before a run is created (bad input, nothing recorded);
``prepare_entity_packages`` then snapshots them into the run's cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from domain.assets import PreparationContext, PreparedAsset
from domain.errors import AssetValidationError
from domain.limits import MeshLimits
from domain.task import PackageAsset, TaskSpec
from runtime.assets.cache import prepare_package
from runtime.assets.package import read_package
from runtime.inputs.paths import resolve_inside


def entity_package_dirs(spec: TaskSpec, task_path: Path) -> dict[str, Path]:
    """Entity id -> package folder of every non-role entity whose asset is a package."""
    roles = set(spec.role_entities().values())
    found: dict[str, Path] = {}
    for entity in spec.scene.entities:
        if entity.entity_id in roles or not isinstance(entity.asset, PackageAsset):
            continue
        catalog = resolve_inside(
            task_path.parent,
            entity.asset.package,
            where=f"{task_path}: package of entity {entity.entity_id!r}",
            error=AssetValidationError,
        )
        found[entity.entity_id] = catalog.parent
    return found


def check_entity_packages(packages: Mapping[str, Path], limits: MeshLimits) -> None:
    """Verify every entity package without writing anything (before ``RunCreated``)."""
    for entity_id in sorted(packages):
        try:
            read_package(packages[entity_id], limits)
        except AssetValidationError as error:
            raise AssetValidationError(f"entity {entity_id!r}: {error}") from None


def prepare_entity_packages(
    packages: Mapping[str, Path], context: PreparationContext
) -> dict[str, PreparedAsset]:
    """Snapshot every entity package into ``context``'s cache (verified, like a role's)."""
    return {
        entity_id: prepare_package(
            packages[entity_id],
            candidate_id=f"entity:{entity_id}",
            locator=str(packages[entity_id]),
            context=context,
        )
        for entity_id in sorted(packages)
    }
