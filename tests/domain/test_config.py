"""CollectionConfig validation: bounds, exact types, uint32 batch seeds, strict from_dict."""

from __future__ import annotations

import pytest

from domain.config import CollectionConfig
from domain.errors import AssetcastInputError, ConfigError


def test_defaults_round_trip() -> None:
    config = CollectionConfig()
    assert config.to_dict() == {
        "seed": 0,
        "max_batches": 1,
        "episodes_per_batch": 1,
        "candidates_per_role": 32,
        "max_search_nodes": 1000,
        "settle_steps": 0,
        "record_trajectory": True,
        "max_mesh_faces": 500_000,
        "max_mesh_vertices": 1_500_000,
        "max_collision_pieces": 64,
    }
    assert CollectionConfig.from_dict(config.to_dict()) == config


def test_extreme_valid_values() -> None:
    CollectionConfig(seed=2**32 - 1, max_batches=1, settle_steps=0)
    CollectionConfig(seed=2**32 - 1_000_000, max_batches=1_000_000)
    CollectionConfig(max_search_nodes=1_000_000, candidates_per_role=1_000_000)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("seed", -1, r"^seed: must be an integer in \[0, 4294967295\], got -1$"),
        ("seed", 2**32, r"^seed: must be an integer in \[0, 4294967295\]"),
        ("max_batches", 0, r"^max_batches: must be an integer in \[1, 1000000\], got 0$"),
        ("episodes_per_batch", 1_000_001, r"^episodes_per_batch: must be an integer in \[1, "),
        ("candidates_per_role", 0, r"^candidates_per_role: must be an integer in \[1, "),
        ("max_search_nodes", 0, r"^max_search_nodes: must be an integer in \[1, "),
        ("settle_steps", -1, r"^settle_steps: must be an integer in \[0, 1000000\], got -1$"),
        ("max_batches", True, r"^max_batches: expected an integer, got bool$"),
        ("seed", 1.0, r"^seed: expected an integer, got float$"),
        ("settle_steps", "3", r"^settle_steps: expected an integer, got str$"),
        ("record_trajectory", 1, r"^record_trajectory: expected a bool, got int$"),
        ("record_trajectory", None, r"^record_trajectory: expected a bool, got null$"),
    ],
)
def test_invalid_field_is_named(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        CollectionConfig(**{field: value})
    assert caught.value.path == field
    assert isinstance(caught.value, AssetcastInputError)


def test_batch_seeds_must_stay_in_uint32() -> None:
    with pytest.raises(
        ConfigError, match=r"^max_batches: the last batch seed .* exceeds 4294967295$"
    ):
        CollectionConfig(seed=2**32 - 1, max_batches=2)


def test_from_dict_refuses_unknown_keys_and_names_the_source() -> None:
    with pytest.raises(ConfigError, match=r"^run\.json: max_batch: unknown key$"):
        CollectionConfig.from_dict({"max_batch": 3}, source="run.json")
    with pytest.raises(ConfigError, match=r"^run\.json: seed: expected an integer, got bool$"):
        CollectionConfig.from_dict({"seed": False}, source="run.json")
    with pytest.raises(ConfigError, match=r"^expected a mapping, got list$"):
        CollectionConfig.from_dict([1, 2])


def test_from_dict_fills_defaults() -> None:
    assert CollectionConfig.from_dict({"seed": 7}) == CollectionConfig(seed=7)
