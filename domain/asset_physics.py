"""Per-asset physics in a descriptor: how heavy an asset is and how grippy its surface.

A ceramic mug and a foam block of the same shape behave differently in a grasp; one scene
density for every asset hides that. A descriptor may therefore carry ``physics``:

```json
"physics": {"mass_kg": 0.35, "friction": {"sliding": 0.6, "torsional": 0.005}}
```

``mass_kg`` (the whole asset) or ``density_kg_m3`` (times the mesh volume), never both;
``friction`` is any subset of MuJoCo's ``sliding``/``torsional``/``rolling`` coefficients,
the simulator's defaults filling the rest. Absent, the task's ``scene.physics.density_kg_m3``
and the default friction apply, and the descriptor serializes without the field, so assets
written before this existed keep their content identity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.canonical import canonical_json
from domain.errors import AssetValidationError

FRICTION_KINDS = ("sliding", "torsional", "rolling")
#: Plausibility caps: a typo of a few orders of magnitude is refused, not simulated.
MAX_MASS_KG = 1000.0
MAX_DENSITY_KG_M3 = 25_000.0  # denser than osmium
MAX_FRICTION = 10.0


def _fail(path: str, message: str, source: str | None) -> AssetValidationError:
    where = f"{source}: " if source else ""
    return AssetValidationError(f"{where}{path}: {message}")


def _number(value: Any, path: str, source: str | None, *, low: float, high: float,
            positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, f"expected a number, got {type(value).__name__}", source)
    number = float(value)
    if not math.isfinite(number):
        raise _fail(path, f"must be finite, got {value!r}", source)
    if positive and number <= low:
        raise _fail(path, f"must be positive, got {value!r}", source)
    if number < low:
        raise _fail(path, f"must not be negative, got {value!r}", source)
    if number > high:
        raise _fail(path, f"must be at most {high:g}, got {value!r}", source)
    return number


def _keys(value: Any, path: str, source: str | None, allowed: tuple[str, ...]) -> Mapping:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected an object, got {type(value).__name__}", source)
    for key in sorted(value, key=str):
        if key not in allowed:
            raise _fail(f"{path}.{key}", "unknown field", source)
    if not value:
        raise _fail(path, f"needs at least one of {', '.join(allowed)}", source)
    return value


@dataclass(frozen=True, eq=False)
class AssetPhysics:
    """What a descriptor's ``physics`` says; ``None`` fields fall back to the scene's.
    Equality and hashing use the canonical dict (``friction`` is a plain mapping)."""

    mass_kg: float | None = None
    density_kg_m3: float | None = None
    friction: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if self.mass_kg is None and self.density_kg_m3 is None and self.friction is None:
            return  # "no overrides": the scene's defaults (a file may not say ``{}``)
        checked = AssetPhysics.from_dict(self.to_dict())
        object.__setattr__(self, "mass_kg", checked.mass_kg)
        object.__setattr__(self, "density_kg_m3", checked.density_kg_m3)
        object.__setattr__(self, "friction", checked.friction)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AssetPhysics):
            return NotImplemented
        return canonical_json(self.to_dict()) == canonical_json(other.to_dict())

    def __hash__(self) -> int:
        return hash(canonical_json(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.mass_kg is not None:
            out["mass_kg"] = self.mass_kg
        if self.density_kg_m3 is not None:
            out["density_kg_m3"] = self.density_kg_m3
        if self.friction is not None:
            out["friction"] = {k: self.friction[k] for k in FRICTION_KINDS if k in self.friction}
        return out

    def mass(self, volume_m3: float, default_density_kg_m3: float) -> float:
        """The body mass: ``mass_kg``, else the volume times this or the scene's density."""
        if self.mass_kg is not None:
            return self.mass_kg
        return volume_m3 * (self.density_kg_m3 or default_density_kg_m3)

    def friction_triple(self, default: tuple[float, float, float]) -> tuple[float, float, float]:
        """MuJoCo's ``(sliding, torsional, rolling)``, the defaults filling what is absent."""
        given = self.friction or {}
        sliding, torsional, rolling = (
            float(given.get(kind, default[index])) for index, kind in enumerate(FRICTION_KINDS)
        )
        return (sliding, torsional, rolling)

    @classmethod
    def from_dict(
        cls, value: Any, *, path: str = "physics", source: str | None = None
    ) -> AssetPhysics:
        mapping = _keys(value, path, source, ("mass_kg", "density_kg_m3", "friction"))
        if "mass_kg" in mapping and "density_kg_m3" in mapping:
            raise _fail(
                f"{path}.density_kg_m3", "give mass_kg or density_kg_m3, not both", source
            )
        mass = density = friction = None
        if "mass_kg" in mapping:
            mass = _number(mapping["mass_kg"], f"{path}.mass_kg", source, low=0.0,
                           high=MAX_MASS_KG, positive=True)
        if "density_kg_m3" in mapping:
            density = _number(mapping["density_kg_m3"], f"{path}.density_kg_m3", source,
                              low=0.0, high=MAX_DENSITY_KG_M3, positive=True)
        if "friction" in mapping:
            raw = _keys(mapping["friction"], f"{path}.friction", source, FRICTION_KINDS)
            friction = {
                kind: _number(raw[kind], f"{path}.friction.{kind}", source, low=0.0,
                              high=MAX_FRICTION, positive=kind == "sliding")
                for kind in FRICTION_KINDS if kind in raw
            }
        physics = object.__new__(cls)
        object.__setattr__(physics, "mass_kg", mass)
        object.__setattr__(physics, "density_kg_m3", density)
        object.__setattr__(physics, "friction", friction)
        return physics
