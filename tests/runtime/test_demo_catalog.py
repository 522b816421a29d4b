"""The procedural demo catalog: valid, deterministic, and useful for matching."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import trimesh

from domain.assets import AssetDescriptor, PreparationContext, PreparedAsset
from domain.errors import AssetValidationError
from runtime.assets.demo_catalog import check_catalog, write_demo_catalog
from runtime.assets.providers import DirectoryAssetProvider

GRIPPER_OPENING_M = 0.09


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    write_demo_catalog(root)
    return root


@pytest.fixture(scope="module")
def prepared(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, PreparedAsset]:
    provider = DirectoryAssetProvider(catalog)
    context = PreparationContext(str(tmp_path_factory.mktemp("cache")))
    return {
        c.candidate_id: provider.materialize(c, context) for c in provider.candidates(None, 100)
    }


def _descriptors(catalog: Path) -> list[AssetDescriptor]:
    return [
        AssetDescriptor.from_dict(json.loads((p / "asset.catalog.json").read_text())["descriptor"])
        for p in sorted(catalog.iterdir())
    ]


def test_every_package_passes_check(catalog: Path) -> None:
    results = check_catalog(catalog)
    assert len(results) >= 24
    assert [r for r in results if not r.ok] == []
    assert {Path(r.path).name for r in results} == {p.name for p in catalog.iterdir()}


def test_bytes_are_deterministic_and_rewrite_is_idempotent(catalog: Path, tmp_path: Path) -> None:
    other = write_demo_catalog(tmp_path / "again")
    assert [p.name for p in other] == sorted(p.name for p in catalog.iterdir())
    for package in other:
        for file in package.iterdir():
            assert file.read_bytes() == (catalog / package.name / file.name).read_bytes()
    assert write_demo_catalog(tmp_path / "again") == other
    (other[0] / "stray.txt").write_text("x")
    with pytest.raises(AssetValidationError, match=r"already exists with different content"):
        write_demo_catalog(tmp_path / "again")


def test_every_loader_and_category_is_exercised(catalog: Path) -> None:
    formats = {
        json.loads((p / "asset.catalog.json").read_text())["visual_path"].rsplit(".", 1)[1]
        for p in catalog.iterdir()
    }
    assert {"obj", "stl", "ply", "glb"} <= formats
    assert any((p / "mesh.mtl").exists() for p in catalog.iterdir())
    descriptors = _descriptors(catalog)
    by_category: dict[str, list[AssetDescriptor]] = {}
    for d in descriptors:
        by_category.setdefault(d.category, []).append(d)
    assert {"block", "cylinder", "bin", "tray", "platform", "bottle", "cup"} <= set(by_category)
    for name in ("bin", "tray", "cup"):
        for d in by_category[name]:
            assert d.attributes["open_top"] is True and "container" in d.capabilities
            assert d.container_region is not None
    for d in by_category["platform"]:
        assert "support_surface" in d.capabilities and d.support_region is not None
    for d in by_category["bottle"]:
        assert {"pour_source", "antipodal_grasp"} <= set(d.capabilities)
        assert d.pouring is not None and d.pouring.mouth_radius_m and d.pouring.evidence
    for d in by_category["cup"]:
        assert d.pouring is not None and d.pouring.opening_radius_m and d.pouring.evidence
    graspables = by_category["block"] + by_category["cylinder"]
    widths = [min(d.bounds_m.extents[:2]) for d in graspables if d.bounds_m]
    assert any(w > GRIPPER_OPENING_M for w in widths) and any(w < 0.05 for w in widths)
    for d in descriptors:
        assert d.normalized and d.bounds_m is not None


def test_relations_hold_for_some_pairs_and_fail_for_others(catalog: Path) -> None:
    descriptors = _descriptors(catalog)
    items = [d for d in descriptors if d.category in ("block", "cylinder")]
    containers = [d for d in descriptors if d.container_region is not None]
    platforms = [d for d in descriptors if d.support_region is not None]
    clearance = 0.005

    def fits(obj: AssetDescriptor, box: AssetDescriptor) -> bool:
        assert obj.bounds_m and box.container_region
        return all(
            o + 2 * clearance <= c
            for o, c in zip(obj.bounds_m.extents, box.container_region.extents, strict=True)
        )

    def supported(obj: AssetDescriptor, base: AssetDescriptor) -> bool:
        assert obj.bounds_m and base.support_region
        return all(
            o + 2 * clearance <= c
            for o, c in zip(obj.bounds_m.extents[:2], base.support_region.extents[:2], strict=True)
        )

    fit = {fits(o, c) for o, c in itertools.product(items, containers)}
    sup = {supported(o, p) for o, p in itertools.product(items, platforms)}
    sources = [d.pouring for d in descriptors if d.category == "bottle"]
    targets = [d.pouring for d in descriptors if d.category == "cup"]
    pours = {
        s.mouth_radius_m + clearance <= t.opening_radius_m  # type: ignore[operator,union-attr]
        for s, t in itertools.product(sources, targets)
    }
    assert fit == {True, False} and sup == {True, False} and pours == {True, False}


def _free(asset: PreparedAsset, margin: float = 1e-3) -> list[str]:
    region = asset.descriptor.container_region
    assert region is not None
    lo = np.asarray(region.lower) + margin
    hi = np.asarray(region.upper) - margin
    intruding = []
    for rel in asset.collision_pieces:
        piece = trimesh.load(Path(asset.snapshot_dir) / rel, force="mesh")
        assert piece.is_convex and piece.volume > 0
        p_lo, p_hi = piece.bounds
        if np.all(p_lo < hi) and np.all(p_hi > lo):
            intruding.append(rel)
    return intruding


def test_container_collision_pieces_leave_interior_free(prepared: dict[str, PreparedAsset]) -> None:
    containers = [a for a in prepared.values() if a.descriptor.container_region is not None]
    assert len(containers) >= 6
    for asset in containers:
        assert len(asset.collision_pieces) >= 2, asset.asset_id
        assert _free(asset) == [], asset.asset_id


def test_bin_pieces_are_its_parts_and_union_covers_its_bounds(
    prepared: dict[str, PreparedAsset],
) -> None:
    asset = prepared["bin-180x140"]
    assert len(asset.collision_pieces) == 5
    folder = Path(asset.snapshot_dir)
    pieces = [trimesh.load(folder / r, force="mesh") for r in asset.collision_pieces]
    lower = np.min([p.bounds[0] for p in pieces], axis=0)
    upper = np.max([p.bounds[1] for p in pieces], axis=0)
    assert asset.descriptor.bounds_m is not None
    assert np.allclose(lower, asset.descriptor.bounds_m.lower)
    assert np.allclose(upper, asset.descriptor.bounds_m.upper)


def test_check_catalog_reports_broken_package_and_empty_catalog(
    catalog: Path, tmp_path: Path
) -> None:
    root = tmp_path / "cat"
    write_demo_catalog(root)
    mesh = root / "block-050" / "mesh.obj"
    mesh.write_bytes(mesh.read_bytes().replace(b"v 0.025", b"v 0.026", 1))
    results = {Path(r.path).name: r for r in check_catalog(root)}
    assert not results["block-050"].ok
    assert "does not match the visual mesh bounds" in results["block-050"].reason
    assert sum(r.ok for r in results.values()) == len(results) - 1
    (tmp_path / "empty").mkdir()
    with pytest.raises(AssetValidationError, match=r"empty: no asset packages found"):
        check_catalog(tmp_path / "empty")
