"""``descriptor.physics``: strict decoding with one-line errors naming the field and file."""

from __future__ import annotations

from typing import Any

import pytest

from domain.asset_physics import AssetPhysics
from domain.assets import AssetDescriptor
from domain.errors import AssetValidationError


def _descriptor(physics: Any) -> dict[str, Any]:
    return {"asset_id": "mug-01", "category": "mug", "physics": physics}


def test_physics_round_trips_and_is_absent_when_not_given() -> None:
    raw = _descriptor({"mass_kg": 0.35, "friction": {"torsional": 0.004, "sliding": 0.6}})
    descriptor = AssetDescriptor.from_dict(raw)
    assert descriptor.physics == AssetPhysics(
        mass_kg=0.35, friction={"sliding": 0.6, "torsional": 0.004}
    )
    assert descriptor.to_dict()["physics"] == {
        "mass_kg": 0.35, "friction": {"sliding": 0.6, "torsional": 0.004}
    }
    assert AssetDescriptor.from_dict(descriptor.to_dict()) == descriptor
    plain = AssetDescriptor.from_dict({"asset_id": "mug-01", "category": "mug"})
    assert plain.physics is None and "physics" not in plain.to_dict()
    assert AssetDescriptor.from_dict(_descriptor(None)) == plain
    assert descriptor != plain and hash(descriptor) != hash(plain)


def test_mass_density_and_friction_defaults() -> None:
    assert AssetPhysics(mass_kg=2.0).mass(0.001, 500.0) == 2.0
    assert AssetPhysics(density_kg_m3=800.0).mass(0.001, 500.0) == pytest.approx(0.8)
    assert AssetPhysics().mass(0.001, 500.0) == pytest.approx(0.5)
    assert AssetPhysics(friction={"rolling": 0.002}).friction_triple((1.0, 0.01, 0.0001)) == (
        1.0, 0.01, 0.002
    )


@pytest.mark.parametrize(
    ("physics", "message"),
    [
        ({"mass_kg": -1}, "descriptor.physics.mass_kg: must be positive, got -1"),
        ({"mass_kg": 0}, "descriptor.physics.mass_kg: must be positive, got 0"),
        ({"mass_kg": "1"}, "descriptor.physics.mass_kg: expected a number, got str"),
        ({"mass_kg": True}, "descriptor.physics.mass_kg: expected a number, got bool"),
        ({"mass_kg": 5000}, "descriptor.physics.mass_kg: must be at most 1000, got 5000"),
        (
            {"mass_kg": 1, "density_kg_m3": 900},
            "descriptor.physics.density_kg_m3: give mass_kg or density_kg_m3, not both",
        ),
        (
            {"density_kg_m3": 1e9},
            "descriptor.physics.density_kg_m3: must be at most 25000, got 1000000000.0",
        ),
        ({}, "descriptor.physics: needs at least one of mass_kg, density_kg_m3, friction"),
        ({"weight": 1}, "descriptor.physics.weight: unknown field"),
        ([1], "descriptor.physics: expected an object, got list"),
        (
            {"friction": {}},
            "descriptor.physics.friction: needs at least one of sliding, torsional, rolling",
        ),
        ({"friction": {"static": 1}}, "descriptor.physics.friction.static: unknown field"),
        ({"friction": {"sliding": 0}}, "descriptor.physics.friction.sliding: must be positive, "
         "got 0"),
        (
            {"friction": {"rolling": -0.1}},
            "descriptor.physics.friction.rolling: must not be negative, got -0.1",
        ),
        (
            {"friction": {"sliding": 20}},
            "descriptor.physics.friction.sliding: must be at most 10, got 20",
        ),
    ],
)
def test_bad_physics_is_one_line_naming_field_and_file(physics: Any, message: str) -> None:
    with pytest.raises(AssetValidationError) as caught:
        AssetDescriptor.from_dict(_descriptor(physics), source="cat/mug-01/asset.catalog.json")
    assert str(caught.value) == f"cat/mug-01/asset.catalog.json: {message}"
