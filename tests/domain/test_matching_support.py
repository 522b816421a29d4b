"""Builders of PreparedAsset values and requirements for matching tests and the benchmark."""

from __future__ import annotations

from typing import Any

from domain.assets import AssetDescriptor, AssetQuery, Bounds3D, PreparedAsset
from domain.canonical import sha256_json
from domain.requirements import AssetRequirements, Relation, RoleRequirement


def box(x: float, y: float, z: float, *, z0: float = 0.0) -> Bounds3D:
    return Bounds3D((-x / 2, -y / 2, z0), (x / 2, y / 2, z0 + z))


def prepared(
    asset_id: str,
    category: str = "block",
    *,
    size: tuple[float, float, float] | None = (0.04, 0.04, 0.04),
    attributes: dict[str, Any] | None = None,
    capabilities: tuple[str, ...] = ("antipodal_grasp",),
    container: tuple[float, float, float] | None = None,
    support: tuple[float, float] | None = None,
    pouring: dict[str, Any] | None = None,
    normalized: bool = True,
    snapshot_dir: str | None = None,
    candidate_id: str | None = None,
) -> PreparedAsset:
    bounds = None if size is None else box(*size)
    descriptor = AssetDescriptor(
        asset_id=asset_id,
        category=category,
        attributes=attributes or {},
        capabilities=capabilities,
        bounds_m=bounds,
        container_region=None if container is None else box(*container, z0=0.0),
        support_region=None if support is None else box(support[0], support[1], 0.0, z0=0.0),
        provenance={"source": "test", "pouring": pouring},
        normalized=normalized and bounds is not None,
    )
    files = {"asset.catalog.json": sha256_json(asset_id), "mesh.obj": sha256_json([asset_id])}
    content = sha256_json({"descriptor": descriptor.to_dict(), "files": files})
    return PreparedAsset(
        candidate_id=candidate_id or f"cand-{asset_id}",
        content_sha256=content,
        descriptor=descriptor,
        snapshot_dir=snapshot_dir or f"/cache/{content}",
        visual_path="mesh.obj",
        collision_path=None,
        files=files,
        collision_pieces=(),
        derived_files={},
        source_locator=f"dir:/catalog/{asset_id}",
    )


def bin_asset(asset_id: str, inner: tuple[float, float, float], **kwargs: Any) -> PreparedAsset:
    outer = (inner[0] + 0.01, inner[1] + 0.01, inner[2])
    kwargs.setdefault("attributes", {"open_top": True})
    kwargs.setdefault("capabilities", ("container",))
    return prepared(asset_id, "bin", size=outer, container=inner, **kwargs)


def role(
    name: str,
    category: str | None,
    *,
    capabilities: tuple[str, ...] = (),
    attributes: dict[str, Any] | None = None,
    max_extent_m: float | None = None,
) -> RoleRequirement:
    query = AssetQuery(category=category, attributes=attributes or {}, capabilities=capabilities)
    return RoleRequirement(name, name, query, max_extent_m)


def item_in_bin(clearance: float = 0.005, **aliases: str) -> AssetRequirements:
    return AssetRequirements(
        {
            "item": role("item", "block", capabilities=("antipodal_grasp",), max_extent_m=0.12),
            "bin": role("bin", "bin", capabilities=("container",), attributes={"open_top": True}),
        },
        (Relation("fits_inside", "item", "bin", clearance),),
        aliases,
    )
