"""Strict decoding of the asset contracts (domain/assets.py)."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.assets import (
    AssetCandidate,
    AssetDescriptor,
    AssetProvider,
    AssetQuery,
    Bounds3D,
    PouringGeometry,
    PreparedAsset,
)
from domain.errors import AssetcastInputError, AssetValidationError


def bin_descriptor() -> dict[str, Any]:
    return {
        "asset_id": "bin-wide-01",
        "category": "bin",
        "attributes": {"open_top": True},
        "capabilities": ["container"],
        "bounds_m": {"lower": [-0.09, -0.07, 0.0], "upper": [0.09, 0.07, 0.06]},
        "container_region": {"lower": [-0.08, -0.06, 0.005], "upper": [0.08, 0.06, 0.06]},
        "support_region": None,
        "provenance": {"source": "procedural", "pouring": None},
        "normalized": True,
    }


def test_design_example_round_trips() -> None:
    raw = bin_descriptor()
    descriptor = AssetDescriptor.from_dict(raw)
    assert descriptor.to_dict() == raw
    assert descriptor.bounds_m is not None
    assert descriptor.bounds_m.extents == pytest.approx((0.18, 0.14, 0.06))
    assert descriptor.pouring is None
    assert AssetValidationError.__mro__[1] is AssetcastInputError


def test_constructor_and_decoder_agree_and_values_are_frozen() -> None:
    built = AssetDescriptor(
        asset_id="bin-wide-01",
        category="bin",
        attributes={"open_top": True},
        capabilities=("container",),
        bounds_m=Bounds3D((-0.09, -0.07, 0.0), (0.09, 0.07, 0.06)),
        container_region=Bounds3D((-0.08, -0.06, 0.005), (0.08, 0.06, 0.06)),
        provenance={"source": "procedural", "pouring": None},
        normalized=True,
    )
    assert built == AssetDescriptor.from_dict(bin_descriptor())
    assert hash(built) == hash(AssetDescriptor.from_dict(bin_descriptor()))
    with pytest.raises(TypeError):
        built.attributes["open_top"] = False  # type: ignore[index]
    assert copy.deepcopy(built) == built
    assert pickle.loads(pickle.dumps(built)) == built


def _mutated(path: list[Any], value: Any) -> dict[str, Any]:
    raw = bin_descriptor()
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["extra"], 1, r"descriptor\.extra: unknown field"),
        (["bounds_m", "lower", 2], 0.07, r"descriptor\.bounds_m\.lower\[2\]: lower 0\.07 exceeds"),
        (["bounds_m", "upper", 0], math.nan, r"descriptor\.bounds_m\.upper\[0\]: must be finite"),
        (["bounds_m", "upper", 1], math.inf, r"descriptor\.bounds_m\.upper\[1\]: must be finite"),
        (["bounds_m", "upper", 1], True, r"descriptor\.bounds_m\.upper\[1\]: expected a number"),
        (["bounds_m", "lower"], [0, 0], r"descriptor\.bounds_m\.lower: expected a list of 3"),
        (["bounds_m", "middle"], [0, 0, 0], r"descriptor\.bounds_m\.middle: unknown field"),
        (["capabilities"], ["container", "container"], r"descriptor\.capabilities\[1\]: dup"),
        (["capabilities"], [""], r"descriptor\.capabilities\[0\]: expected a nonempty string"),
        (["attributes", "weight"], math.nan, r"descriptor\.attributes\.weight: must be finite"),
        (["attributes", "tags"], ["a"], r"descriptor\.attributes\.tags: attribute values must"),
        (["attributes", "x"], None, r"descriptor\.attributes\.x: attribute values must"),
        (["provenance", "score"], math.inf, r"descriptor\.provenance\.score: must be finite"),
        (["normalized"], "yes", r"descriptor\.normalized: expected true or false"),
        (["bounds_m"], None, r"descriptor\.bounds_m: normalized: true requires bounds_m"),
        (["asset_id"], "", r"descriptor\.asset_id: expected a nonempty string"),
        (
            ["container_region", "upper", 2],
            0.07,
            r"descriptor\.container_region\.upper\[2\]: lies outside bounds_m",
        ),
        (
            ["support_region"],
            {"lower": [-0.05, -0.05, 0.0], "upper": [0.05, 0.05, 0.01]},
            r"descriptor\.support_region\.upper\[2\]: support region must be horizontal",
        ),
        (
            ["support_region"],
            {"lower": [-0.10, -0.05, 0.06], "upper": [0.05, 0.05, 0.06]},
            r"descriptor\.support_region\.lower\[0\]: lies outside bounds_m",
        ),
        (
            ["bounds_m"],
            {"lower": [-0.09, -0.07, -0.01], "upper": [0.09, 0.07, 0.06]},
            r"descriptor\.bounds_m\.lower\[2\]: normalized asset must have its origin at the bot",
        ),
        (
            ["bounds_m"],
            {"lower": [-0.10, -0.07, 0.0], "upper": [0.09, 0.07, 0.06]},
            r"descriptor\.bounds_m\.lower\[0\]: normalized asset must be centred",
        ),
    ],
)
def test_bad_descriptor_names_the_field_and_file(path: list[Any], value: Any, message: str) -> None:
    with pytest.raises(AssetValidationError, match=r"^pkg/asset\.catalog\.json: " + message):
        AssetDescriptor.from_dict(_mutated(path, value), source="pkg/asset.catalog.json")


def test_missing_required_field() -> None:
    raw = bin_descriptor()
    del raw["category"]
    with pytest.raises(AssetValidationError, match=r"descriptor\.category: required field"):
        AssetDescriptor.from_dict(raw)


@pytest.mark.parametrize(
    ("pouring", "message"),
    [
        ({"mouth_radius_m": 0.0, "evidence": "x"}, r"pouring\.mouth_radius_m: must be positive"),
        (
            {"opening_radius_m": math.nan, "evidence": "x"},
            r"pouring\.opening_radius_m: must be finite",
        ),
        ({"mouth_radius_m": 0.01, "evidence": "  "}, r"pouring\.evidence: expected a nonempty"),
        ({"mouth_radius_m": 0.01}, r"pouring\.evidence: required field is missing"),
        ({"evidence": "x"}, r"pouring: needs mouth_radius_m or opening_radius_m"),
        ({"mouth_radius_m": 0.01, "evidence": "x", "k": 1}, r"pouring\.k: unknown field"),
    ],
)
def test_pouring_evidence_rules(pouring: dict[str, Any], message: str) -> None:
    raw = bin_descriptor()
    raw["provenance"]["pouring"] = pouring
    with pytest.raises(AssetValidationError, match=r"descriptor\.provenance\." + message):
        AssetDescriptor.from_dict(raw)


def test_pouring_geometry_is_exposed() -> None:
    raw = bin_descriptor()
    raw["provenance"]["pouring"] = {"opening_radius_m": 0.04, "evidence": "measured rim"}
    pouring = AssetDescriptor.from_dict(raw).pouring
    assert pouring == PouringGeometry(None, 0.04, "measured rim")
    with pytest.raises(AssetValidationError, match=r"pouring\.mouth_radius_m: must be positive"):
        PouringGeometry(-1.0, None, "x")


def test_bounds_constructor_is_strict() -> None:
    with pytest.raises(AssetValidationError, match=r"bounds\.lower\[1\]: lower 1\.0 exceeds"):
        Bounds3D((0.0, 1.0, 0.0), (1.0, 0.0, 1.0))
    assert Bounds3D((0, 0, 0), (1, 2, 3)).extents == (1.0, 2.0, 3.0)


def test_query_decoding() -> None:
    query = AssetQuery.from_dict({"category": "bin", "attributes": {"open_top": True}})
    assert query == AssetQuery("bin", {"open_top": True}, ())
    assert AssetQuery().category is None
    with pytest.raises(AssetValidationError, match=r"query\.colour: unknown field"):
        AssetQuery.from_dict({"colour": "red"})
    with pytest.raises(AssetValidationError, match=r"query\.capabilities\[1\]: duplicate"):
        AssetQuery(capabilities=("a", "a"))


def test_prepared_asset_identity_and_protocol() -> None:
    descriptor = AssetDescriptor.from_dict(bin_descriptor())
    asset = PreparedAsset(
        "c", "ab" * 32, descriptor, "/cache/x", "mesh.obj", None,
        {"mesh.obj": "1" * 64}, (), {}, "/src",
    )
    assert asset.identity == {"asset_id": "bin-wide-01", "content_sha256": "ab" * 32}
    assert set(asset.snapshot_dict()) == {
        "schema_version", "content_sha256", "candidate_id", "descriptor", "visual_path",
        "collision_path", "files", "collision_pieces", "derived_files", "source_locator",
    }
    assert AssetCandidate("c", "/x", None, "broken").descriptor is None

    class Fake:
        def describe(self) -> dict[str, Any]:
            return {}

        def candidates(self, query: AssetQuery, limit: int) -> list[AssetCandidate]:
            return []

        def materialize(self, candidate: AssetCandidate, context: Any) -> PreparedAsset:
            return asset

    assert isinstance(Fake(), AssetProvider)
    assert not isinstance(object(), AssetProvider)


_finite = st.floats(min_value=-10, max_value=10, allow_nan=False, allow_infinity=False)
_names = st.text(alphabet="abcdefghij_-0123456789", min_size=1, max_size=8)
_scalars = st.one_of(st.booleans(), st.integers(-1000, 1000), _finite, st.text(max_size=6))


@st.composite
def descriptors(draw: st.DrawFn) -> dict[str, Any]:
    half = [draw(st.floats(0.01, 1.0)) for _ in range(2)]
    height = draw(st.floats(0.01, 1.0))
    lower, upper = [-half[0], -half[1], 0.0], [half[0], half[1], height]
    bounds = {"lower": lower, "upper": upper}
    shrink = draw(st.floats(0.0, 0.9))
    inner = {
        "lower": [lower[0] * shrink, lower[1] * shrink, height * (1 - shrink) / 2],
        "upper": [upper[0] * shrink, upper[1] * shrink, height],
    }
    support = {
        "lower": [lower[0] * shrink, lower[1] * shrink, height],
        "upper": [upper[0] * shrink, upper[1] * shrink, height],
    }
    pouring = draw(
        st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "mouth_radius_m": st.floats(0.001, 0.1),
                    "opening_radius_m": st.one_of(st.none(), st.floats(0.001, 0.1)),
                    "evidence": _names,
                }
            ),
        )
    )
    return {
        "asset_id": draw(_names),
        "category": draw(_names),
        "attributes": draw(st.dictionaries(_names, _scalars, max_size=4)),
        "capabilities": draw(st.lists(_names, unique=True, max_size=4)),
        "bounds_m": bounds,
        "container_region": draw(st.one_of(st.none(), st.just(inner))),
        "support_region": draw(st.one_of(st.none(), st.just(support))),
        "provenance": {"source": draw(_names), "pouring": pouring},
        "normalized": draw(st.booleans()),
    }


@settings(max_examples=150, deadline=None)
@given(descriptors())
def test_descriptor_round_trip(raw: dict[str, Any]) -> None:
    descriptor = AssetDescriptor.from_dict(copy.deepcopy(raw))
    assert descriptor.to_dict() == raw
    again = AssetDescriptor.from_dict(descriptor.to_dict())
    assert again == descriptor and hash(again) == hash(descriptor)
