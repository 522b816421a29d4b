"""Property tests: any returned set is valid; the matcher finds a set iff brute force does."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from domain.assets import PreparedAsset
from domain.matching import MatchingError, resolve_asset_set
from domain.requirements import AssetRequirements, Relation
from tests.domain.test_matching_support import prepared, role

ROLES = ("r0", "r1", "r2")
TOL = 1e-9
grid = st.integers(min_value=1, max_value=6).map(lambda n: n / 100)


@st.composite
def assets(draw: st.DrawFn, name: str) -> PreparedAsset:
    size = (draw(grid), draw(grid), draw(grid))
    inner = draw(st.none() | st.tuples(grid, grid, grid))
    container = (
        None if inner is None else tuple(min(a, b) for a, b in zip(inner, size, strict=True))
    )
    return prepared(
        name,
        draw(st.sampled_from(["a", "b", "c"])),
        size=size,
        capabilities=tuple(sorted(draw(st.sets(st.sampled_from(["grasp", "container"]))))),
        container=container,
        support=None if draw(st.booleans()) else (size[0], size[1]),
        normalized=draw(st.sampled_from([True, True, True, False])),
    )


@st.composite
def instances(draw: st.DrawFn) -> tuple[AssetRequirements, dict[str, list[PreparedAsset]]]:
    count = draw(st.integers(min_value=1, max_value=3))
    roles = ROLES[:count]
    requirements = {
        name: role(
            name,
            draw(st.sampled_from([None, None, "a", "b"])),
            capabilities=draw(st.sampled_from([(), (), ("grasp",)])),
            max_extent_m=draw(st.none() | grid),
        )
        for name in roles
    }
    pairs = [(a, b) for a in roles for b in roles if a != b]
    relations = tuple(
        Relation(
            draw(st.sampled_from(["fits_inside", "supported_by"])),
            a,
            b,
            draw(st.sampled_from([0.0, 0.005])),
        )
        for a, b in draw(
            st.lists(st.sampled_from(pairs), max_size=2, unique=True) if pairs else st.just([])
        )
    )
    aliases = {"c": "a"} if draw(st.booleans()) else {}
    pools = {
        name: [draw(assets(f"{name}-{i}")) for i in range(draw(st.integers(0, 5)))]
        for name in roles
    }
    return AssetRequirements(requirements, relations, aliases), pools


def role_ok(req: AssetRequirements, name: str, asset: PreparedAsset) -> bool:
    wanted = req.roles[name]
    d = asset.descriptor
    if wanted.query.category is not None and req.canonical_category(
        d.category
    ) != req.canonical_category(wanted.query.category):
        return False
    if not set(wanted.query.capabilities) <= set(d.capabilities):
        return False
    if not d.normalized or d.bounds_m is None:
        return False
    return wanted.max_extent_m is None or max(d.bounds_m.extents) <= wanted.max_extent_m


def relation_ok(relation: Relation, obj: PreparedAsset, target: PreparedAsset) -> bool:
    region = (
        target.descriptor.container_region
        if relation.kind == "fits_inside"
        else target.descriptor.support_region
    )
    if region is None or obj.descriptor.bounds_m is None:
        return False
    axes = 3 if relation.kind == "fits_inside" else 2
    need, have = obj.descriptor.bounds_m.extents, region.extents
    return all(need[a] + 2 * relation.clearance_m <= have[a] + TOL for a in range(axes))


def valid(req: AssetRequirements, chosen: dict[str, PreparedAsset]) -> bool:
    return all(role_ok(req, name, asset) for name, asset in chosen.items()) and all(
        relation_ok(rel, chosen[rel.object_role], chosen[rel.target_role]) for rel in req.relations
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.integers(min_value=0, max_value=2**32 - 1))
def test_matcher_agrees_with_brute_force(instance, seed) -> None:
    req, pools = instance
    names = sorted(req.roles)
    brute = any(
        valid(req, dict(zip(names, combo, strict=True)))
        for combo in itertools.product(*(pools[name] for name in names))
    )
    event(f"solvable={brute}")
    try:
        result = resolve_asset_set(
            req, pools, seed=seed, max_candidates_per_role=100, max_search_nodes=1_000_000
        )
    except MatchingError as error:
        assert not brute, error.to_dict()
        assert not error.budget_exhausted
        return
    assert brute
    assert set(result.assets) == set(names)
    assert valid(req, dict(result.assets))
    for name in names:
        assert any(result.assets[name] is asset for asset in pools[name])
