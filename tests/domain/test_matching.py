"""resolve_asset_set: every rejection code, determinism, budgets, diagnostics."""

from __future__ import annotations

import json
import random

import pytest

from domain.canonical import sha256_json
from domain.errors import AssetcastError
from domain.matching import MAX_REJECTION_DETAILS, MatchingError, resolve_asset_set
from domain.requirements import AssetRequirements, Relation
from tests.domain.test_matching_support import bin_asset, item_in_bin, prepared, role

POUR = {"mouth_radius_m": 0.03, "opening_radius_m": None, "evidence": "measured rim"}


def resolve(requirements, pools, *, seed=0, candidates=32, nodes=1000):
    return resolve_asset_set(
        requirements,
        pools,
        seed=seed,
        max_candidates_per_role=candidates,
        max_search_nodes=nodes,
    )


def failure(requirements, pools, **kwargs) -> MatchingError:
    with pytest.raises(MatchingError) as caught:
        resolve(requirements, pools, **kwargs)
    return caught.value


def codes(error: MatchingError) -> set[tuple[str, str | None, str]]:
    return {(r.role, r.asset_id, r.code) for r in error.rejections}


def test_resolves_and_digests_identity_not_paths() -> None:
    req = item_in_bin()
    item = prepared("cube-1")
    bin_ = bin_asset("bin-1", (0.1, 0.1, 0.06))
    result = resolve(req, {"item": [item], "bin": [bin_]}, seed=5)
    assert dict(result.assets) == {"item": item, "bin": bin_}
    assert result.seed == 5
    assert result.requirements_digest == req.digest()
    assert result.set_id == sha256_json(
        {
            "seed": 5,
            "requirements_digest": req.digest(),
            "assets": {"bin": bin_.identity, "item": item.identity},
        }
    )
    assert result.search_nodes == 2
    moved = prepared("cube-1", snapshot_dir="/elsewhere/x")
    again = resolve(req, {"item": [moved], "bin": [bin_]}, seed=5)
    assert again.set_id == result.set_id
    assert resolve(req, {"item": [item], "bin": [bin_]}, seed=6).set_id != result.set_id


def test_aliases_apply_to_query_and_descriptor() -> None:
    req = item_in_bin(cube="block", block_like="cube")
    bin_ = bin_asset("bin-1", (0.1, 0.1, 0.06))
    result = resolve(req, {"item": [prepared("c", "block_like")], "bin": [bin_]})
    assert result.assets["item"].asset_id == "c"
    req2 = AssetRequirements({"item": role("item", "cube")}, (), {"cube": "block"})
    assert resolve(req2, {"item": [prepared("b", "block")]}).assets["item"].asset_id == "b"


@pytest.mark.parametrize(
    ("asset", "code"),
    [
        (prepared("x", "sphere"), "category_mismatch"),
        (prepared("x", capabilities=()), "missing_capability"),
        (prepared("x", size=(0.2, 0.04, 0.04)), "extent_exceeded"),
        (prepared("x", size=None), "missing_bounds"),
        (prepared("x", normalized=False), "not_normalized"),
    ],
)
def test_item_filter_codes(asset, code) -> None:
    bin_ = bin_asset("bin-1", (0.3, 0.3, 0.3))
    error = failure(item_in_bin(), {"item": [asset], "bin": [bin_]})
    assert ("item", "x", code) in codes(error)
    assert ("item", None, "no_candidates") in codes(error)
    assert error.role_summaries["item"] == {
        "candidates": 1,
        "eligible": 0,
        "codes": {code: 1, "no_candidates": 1}
        | ({"not_normalized": 1} if code == "missing_bounds" else {}),
    }
    assert error.search_nodes == 0
    assert not error.budget_exhausted


def test_attribute_mismatch_is_exact_typed() -> None:
    item = prepared("i")
    pools = {
        "item": [item],
        "bin": [bin_asset("one", (0.1, 0.1, 0.06), attributes={"open_top": 1})],
    }
    error = failure(item_in_bin(), pools)
    [rejection] = [r for r in error.rejections if r.code == "attribute_mismatch"]
    assert rejection.detail == "attribute 'open_top' is 1, not True"
    pools["bin"] = [bin_asset("none", (0.1, 0.1, 0.06), attributes={})]
    assert ("bin", "none", "attribute_mismatch") in codes(failure(item_in_bin(), pools))


def test_missing_container_region() -> None:
    plain = prepared(
        "b", "bin", size=(0.2, 0.2, 0.1), attributes={"open_top": True}, capabilities=("container",)
    )
    error = failure(item_in_bin(), {"item": [prepared("i")], "bin": [plain]})
    [rejection] = [r for r in error.rejections if r.code == "missing_relation_geometry"]
    assert (rejection.role, rejection.target_role) == ("bin", "item")


def test_relation_does_not_fit_counts_clearance_on_every_axis() -> None:
    item = prepared("i", size=(0.04, 0.04, 0.04))
    exact = bin_asset("exact", (0.05, 0.05, 0.05))  # 0.04 + 2 x 0.005 == 0.05 fits
    assert resolve(item_in_bin(), {"item": [item], "bin": [exact]}).assets["bin"] is exact
    for inner in [(0.049, 0.05, 0.05), (0.05, 0.049, 0.05), (0.05, 0.05, 0.049)]:
        error = failure(item_in_bin(), {"item": [item], "bin": [bin_asset("tight", inner)]})
        [rejection] = [r for r in error.rejections if r.code == "relation_does_not_fit"]
        assert (rejection.role, rejection.asset_id, rejection.target_role) == ("item", "i", "bin")
        assert not error.budget_exhausted
        assert error.search_nodes == 2


def test_supported_by_uses_x_and_y_only() -> None:
    req = AssetRequirements(
        {"item": role("item", "block"), "tray": role("tray", "tray")},
        (Relation("supported_by", "item", "tray", 0.0),),
    )
    tall = prepared("tall", size=(0.04, 0.04, 0.5))
    tray = prepared("t", "tray", size=(0.1, 0.1, 0.01), support=(0.05, 0.05))
    assert resolve(req, {"item": [tall], "tray": [tray]}).assets["tray"] is tray
    small = prepared("s", "tray", size=(0.1, 0.1, 0.01), support=(0.03, 0.05))
    assert ("item", "tall", "relation_does_not_fit") in codes(
        failure(req, {"item": [tall], "tray": [small]})
    )
    bare = prepared("bare", "tray", size=(0.1, 0.1, 0.01))
    assert ("tray", "bare", "missing_relation_geometry") in codes(
        failure(req, {"item": [tall], "tray": [bare]})
    )


def pour_requirements(clearance: float = 0.002) -> AssetRequirements:
    return AssetRequirements(
        {"cup": role("cup", "cup"), "bowl": role("bowl", "bowl")},
        (Relation("pours_into", "cup", "bowl", clearance),),
    )


def cup(asset_id: str, mouth: float | None, caps=("pour_source", "antipodal_grasp")):
    pouring = None if mouth is None else {"mouth_radius_m": mouth, "evidence": "rim"}
    return prepared(asset_id, "cup", capabilities=caps, pouring=pouring)


def bowl(asset_id: str, opening: float | None, caps=("container",)):
    pouring = None if opening is None else {"opening_radius_m": opening, "evidence": "rim"}
    return prepared(asset_id, "bowl", size=(0.2, 0.2, 0.08), capabilities=caps, pouring=pouring)


def test_pours_into() -> None:
    req = pour_requirements()
    ok = resolve(req, {"cup": [cup("c", 0.03)], "bowl": [bowl("b", 0.032)]})
    assert ok.assets["cup"].asset_id == "c"
    small = failure(req, {"cup": [cup("c", 0.03)], "bowl": [bowl("b", 0.031)]})
    assert ("cup", "c", "pouring_aperture_too_small") in codes(small)
    missing = failure(req, {"cup": [cup("c", None)], "bowl": [bowl("b", None)]})
    assert {
        ("cup", "c", "missing_pouring_geometry"),
        ("bowl", "b", "missing_pouring_geometry"),
    } <= codes(missing)
    caps = failure(
        req, {"cup": [cup("c", 0.03, caps=("pour_source",))], "bowl": [bowl("b", 0.05, caps=())]}
    )
    assert {("cup", "c", "missing_capability"), ("bowl", "b", "missing_capability")} <= codes(caps)


def test_candidate_budget_keeps_the_best_ranked() -> None:
    items = [prepared(f"i{n}") for n in range(10)]
    bins = [bin_asset("b", (0.1, 0.1, 0.06))]
    result = resolve(item_in_bin(), {"item": items, "bin": bins}, seed=3, candidates=4)
    ranked = sorted(items, key=lambda a: sha256_json([3, "item", a.identity]))
    assert result.assets["item"] is ranked[0]
    bad_items = [prepared(f"i{n}", "sphere") for n in range(10)]
    error = failure(item_in_bin(), {"item": bad_items, "bin": bins}, seed=3, candidates=4)
    assert error.role_summaries["item"]["codes"] == {
        "candidate_budget": 6,
        "category_mismatch": 4,
        "no_candidates": 1,
    }
    assert error.budget["candidates_dropped"] == 6
    dropped = {r.asset_id for r in error.rejections if r.code == "candidate_budget"}
    ranked_bad = sorted(bad_items, key=lambda a: sha256_json([3, "item", a.identity]))
    assert dropped == {a.asset_id for a in ranked_bad[4:]}


def test_no_candidates_for_an_empty_or_missing_pool() -> None:
    error = failure(item_in_bin(), {"item": [prepared("i")]})
    assert ("bin", None, "no_candidates") in codes(error)
    assert error.role_summaries["bin"] == {
        "candidates": 0,
        "eligible": 0,
        "codes": {"no_candidates": 1},
    }
    assert str(error) == "seed 0: no eligible candidates for role(s) bin"


def test_search_budget_stops_the_search() -> None:
    # 30 items x 30 bins, none fits: exhaustive search needs 30 + 900 extensions
    items = [prepared(f"i{n}", size=(0.1, 0.1, 0.1)) for n in range(30)]
    bins = [bin_asset(f"b{n}", (0.05, 0.05, 0.05)) for n in range(30)]
    pools = {"item": items, "bin": bins}
    error = failure(item_in_bin(), pools, nodes=50)
    assert error.budget_exhausted
    assert error.search_nodes == 50
    assert error.budget["search_nodes"] == 50 and error.budget["max_search_nodes"] == 50
    assert error.rejections[0].code == "search_budget"
    assert "search budget exhausted after 50 nodes" in str(error)
    full = failure(item_in_bin(), pools, nodes=1_000_000)
    assert not full.budget_exhausted
    assert full.search_nodes == 930
    assert "search_budget" not in {r.code for r in full.rejections}


def test_a_solution_past_the_budget_is_not_found_but_within_it_is() -> None:
    items = [prepared(f"i{n}", size=(0.1, 0.1, 0.1)) for n in range(5)]
    fitting = prepared("small", size=(0.02, 0.02, 0.02))
    bins = [bin_asset("b", (0.05, 0.05, 0.05))]
    pools = {"item": [*items, fitting], "bin": bins}
    result = resolve(item_in_bin(), pools, nodes=100)
    assert result.assets["item"] is fitting
    assert result.search_nodes <= 7
    with pytest.raises(MatchingError) as caught:
        resolve(item_in_bin(), pools, nodes=result.search_nodes - 1)
    assert caught.value.budget_exhausted


def test_rejections_are_bounded_and_serializable() -> None:
    items = [prepared(f"i{n}", "sphere", capabilities=()) for n in range(400)]
    error = failure(
        item_in_bin(), {"item": items, "bin": [bin_asset("b", (0.1, 0.1, 0.1))]}, candidates=400
    )
    assert len(error.rejections) <= MAX_REJECTION_DETAILS + 1
    assert error.rejections[0].code == "no_candidates"
    assert error.rejections_total == 801
    assert error.role_summaries["item"]["codes"] == {
        "category_mismatch": 400,
        "missing_capability": 400,
        "no_candidates": 1,
    }
    payload = json.loads(json.dumps(error.to_dict()))
    assert payload["error_type"] == "MatchingError"
    assert payload["search_nodes"] == 0
    assert "\n" not in str(error)
    assert isinstance(error, AssetcastError)


def test_deterministic_under_shuffled_order_and_duplicates() -> None:
    items = [prepared(f"i{n}", size=(0.02 + 0.01 * (n % 9), 0.04, 0.04)) for n in range(40)]
    bins = [bin_asset(f"b{n}", (0.03 + 0.01 * (n % 7), 0.06, 0.06)) for n in range(40)]
    # same content prepared twice (two snapshot dirs / candidates): one representative wins
    items.append(prepared("i3", size=(0.05, 0.04, 0.04), snapshot_dir="/zzz", candidate_id="dup"))
    items.append(prepared("i3", size=(0.05, 0.04, 0.04), snapshot_dir="/aaa", candidate_id="dup"))
    reference = {
        seed: resolve(item_in_bin(), {"item": items, "bin": bins}, seed=seed, candidates=8)
        for seed in range(10)
    }
    rng = random.Random(1)
    for _ in range(5):
        shuffled_items, shuffled_bins = items[:], bins[:]
        rng.shuffle(shuffled_items)
        rng.shuffle(shuffled_bins)
        for seed, expected in reference.items():
            got = resolve(
                item_in_bin(),
                {"bin": shuffled_bins, "item": shuffled_items},
                seed=seed,
                candidates=8,
            )
            assert got.set_id == expected.set_id
            assert got.search_nodes == expected.search_nodes
            for name in ("item", "bin"):
                assert got.assets[name].snapshot_dir == expected.assets[name].snapshot_dir
    assert len({r.set_id for r in reference.values()}) > 1  # the seed really varies the choice


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"max_search_nodes must be an int >= 1, got 0"):
        resolve(item_in_bin(), {}, nodes=0)
    with pytest.raises(
        ValueError, match=r"pools name roles the requirements do not declare: \['lid'\]"
    ):
        resolve(item_in_bin(), {"lid": []})
    with pytest.raises(TypeError, match=r"pool of role 'item' holds str, not PreparedAsset"):
        resolve(item_in_bin(), {"item": ["x"]})
