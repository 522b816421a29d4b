"""Budgets and seeds of one collection run.

The config is recorded in ``RunCreated`` and replayed on resume, so it must be exactly
reproducible: counts are real ints (``True`` is not 1 here), every limit is bounded so no
flag can ask for unbounded work, and the per-batch seeds ``seed + i`` stay within uint32.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from domain import fields as f
from domain.limits import (
    DEFAULT_MAX_COLLISION_PIECES,
    DEFAULT_MAX_MESH_FACES,
    DEFAULT_MAX_MESH_VERTICES,
    MeshLimits,
)

UINT32_MAX = 2**32 - 1
COUNT_MAX = 1_000_000

# field -> (lower, upper) inclusive bounds
_BOUNDS: Mapping[str, tuple[int, int]] = {
    "seed": (0, UINT32_MAX),
    "max_batches": (1, COUNT_MAX),
    "episodes_per_batch": (1, COUNT_MAX),
    "candidates_per_role": (1, COUNT_MAX),
    "max_search_nodes": (1, COUNT_MAX),
    "settle_steps": (0, COUNT_MAX),
    "max_mesh_faces": (1, 100_000_000),
    "max_mesh_vertices": (3, 100_000_000),
    "max_collision_pieces": (1, 4096),
}


@dataclass(frozen=True)
class CollectionConfig:
    """Seed and finite budgets; batch ``i`` uses seed ``seed + i``."""

    seed: int = 0
    max_batches: int = 1
    episodes_per_batch: int = 1
    candidates_per_role: int = 32
    max_search_nodes: int = 1000
    settle_steps: int = 0
    record_trajectory: bool = True
    max_mesh_faces: int = DEFAULT_MAX_MESH_FACES
    max_mesh_vertices: int = DEFAULT_MAX_MESH_VERTICES
    max_collision_pieces: int = DEFAULT_MAX_COLLISION_PIECES

    def __post_init__(self) -> None:
        _validate(asdict(self), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def mesh_limits(self) -> MeshLimits:
        return MeshLimits(
            max_mesh_faces=self.max_mesh_faces,
            max_mesh_vertices=self.max_mesh_vertices,
            max_collision_pieces=self.max_collision_pieces,
        )

    @classmethod
    def from_dict(cls, data: Any, *, source: str | None = None) -> CollectionConfig:
        """Strict inverse of ``to_dict``: unknown keys are errors, missing keys take defaults."""
        names = tuple(item.name for item in fields(cls))
        values = {**asdict(cls()), **f.mapping(data, "", source, optional=names)}
        _validate(values, source)
        return cls(**values)


def _validate(values: Mapping[str, Any], source: str | None) -> None:
    for name, (lower, upper) in _BOUNDS.items():
        f.integer(values[name], name, source, lower=lower, upper=upper)
    f.boolean(values["record_trajectory"], "record_trajectory", source)
    last_seed = values["seed"] + values["max_batches"] - 1
    if last_seed > UINT32_MAX:
        f.fail(
            "max_batches",
            f"the last batch seed (seed + max_batches - 1 = {last_seed}) exceeds {UINT32_MAX}",
            source,
        )
