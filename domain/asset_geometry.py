"""Geometry an asset declares: its bounding box, container and support regions, pouring
apertures, and the cross-field rules they must satisfy together (regions inside the box, a
horizontal support, the ``normalized: true`` frame)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.asset_fields import (
    check_keys,
    field_error,
    finite,
    nonempty_str,
    require_mapping,
    triple,
)

#: Tolerance for "lies within" comparisons between declared boxes (metres).
REGION_TOLERANCE_M = 1e-9
#: Tolerance for the "origin at the bottom centre" claim of ``normalized: true``.
NORMALIZED_TOLERANCE_M = 1e-6


@dataclass(frozen=True)
class Bounds3D:
    """Axis-aligned box in the package frame (metres); ``lower <= upper`` per axis."""

    lower: tuple[float, float, float]
    upper: tuple[float, float, float]

    def __post_init__(self) -> None:
        self._validate("bounds", None)

    def _validate(self, path: str, source: str | None) -> None:
        lower = triple(self.lower, f"{path}.lower", source)
        upper = triple(self.upper, f"{path}.upper", source)
        for axis in range(3):
            if lower[axis] > upper[axis]:
                raise field_error(
                    f"{path}.lower[{axis}]",
                    f"lower {lower[axis]!r} exceeds upper {upper[axis]!r}",
                    source,
                )
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    @property
    def extents(self) -> tuple[float, float, float]:
        return (
            self.upper[0] - self.lower[0],
            self.upper[1] - self.lower[1],
            self.upper[2] - self.lower[2],
        )

    def contains(self, other: Bounds3D, tolerance: float = REGION_TOLERANCE_M) -> bool:
        return all(
            other.lower[a] >= self.lower[a] - tolerance
            and other.upper[a] <= self.upper[a] + tolerance
            for a in range(3)
        )

    def to_dict(self) -> dict[str, list[float]]:
        return {"lower": list(self.lower), "upper": list(self.upper)}

    @classmethod
    def from_dict(cls, value: Any, *, path: str = "bounds", source: str | None = None) -> Bounds3D:
        mapping = require_mapping(value, path, source)
        check_keys(mapping, path, source, required=("lower", "upper"))
        # Raw values in, then the one validation (which decodes them) with this path.
        box = object.__new__(cls)
        object.__setattr__(box, "lower", mapping["lower"])
        object.__setattr__(box, "upper", mapping["upper"])
        box._validate(path, source)
        return box


@dataclass(frozen=True)
class PouringGeometry:
    """Aperture radii backing ``pours_into``; the evidence says where the number came from."""

    mouth_radius_m: float | None
    opening_radius_m: float | None
    evidence: str

    def __post_init__(self) -> None:
        self._validate("pouring", None)

    def _validate(self, path: str, source: str | None) -> None:
        if self.mouth_radius_m is None and self.opening_radius_m is None:
            raise field_error(path, "needs mouth_radius_m or opening_radius_m", source)
        for name in ("mouth_radius_m", "opening_radius_m"):
            value = getattr(self, name)
            if value is None:
                continue
            radius = finite(value, f"{path}.{name}", source)
            if radius <= 0:
                raise field_error(f"{path}.{name}", f"must be positive, got {value!r}", source)
            object.__setattr__(self, name, radius)
        nonempty_str(self.evidence, f"{path}.evidence", source)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mouth_radius_m": self.mouth_radius_m,
            "opening_radius_m": self.opening_radius_m,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(
        cls, value: Any, *, path: str = "pouring", source: str | None = None
    ) -> PouringGeometry:
        mapping = require_mapping(value, path, source)
        check_keys(
            mapping, path, source, required=("evidence",),
            optional=("mouth_radius_m", "opening_radius_m"),
        )
        geometry = object.__new__(cls)
        object.__setattr__(geometry, "mouth_radius_m", mapping.get("mouth_radius_m"))
        object.__setattr__(geometry, "opening_radius_m", mapping.get("opening_radius_m"))
        object.__setattr__(geometry, "evidence", mapping["evidence"])
        geometry._validate(path, source)
        return geometry


def check_geometry(
    boxes: Mapping[str, Bounds3D | None],
    normalized: bool,
    origin: Any,
    path: str,
    source: str | None,
) -> None:
    """Cross-field rules: horizontal support, regions inside bounds, normalized frame.

    ``provenance.origin: "footprint"`` declares the XY origin at the centre of the base
    instead of the box (a mug's handle pulls the box off its body): the origin must then
    lie inside the box, not at its centre."""
    bounds = boxes["bounds_m"]
    support = boxes["support_region"]
    if support is not None and support.upper[2] != support.lower[2]:
        raise field_error(
            f"{path}.support_region.upper[2]",
            "support region must be horizontal (zero Z extent)",
            source,
        )
    for name in ("container_region", "support_region"):
        region = boxes[name]
        if region is None or bounds is None:
            continue
        for axis in range(3):
            if region.lower[axis] < bounds.lower[axis] - REGION_TOLERANCE_M:
                raise field_error(f"{path}.{name}.lower[{axis}]", "lies outside bounds_m", source)
            if region.upper[axis] > bounds.upper[axis] + REGION_TOLERANCE_M:
                raise field_error(f"{path}.{name}.upper[{axis}]", "lies outside bounds_m", source)
    if not normalized:
        return
    if bounds is None:
        raise field_error(f"{path}.bounds_m", "normalized: true requires bounds_m", source)
    if abs(bounds.lower[2]) > NORMALIZED_TOLERANCE_M:
        raise field_error(
            f"{path}.bounds_m.lower[2]",
            "normalized asset must have its origin at the bottom (lower z = 0)",
            source,
        )
    for axis in (0, 1):
        if origin == "footprint":
            if not bounds.lower[axis] - NORMALIZED_TOLERANCE_M <= 0 <= (
                bounds.upper[axis] + NORMALIZED_TOLERANCE_M
            ):
                raise field_error(
                    f"{path}.bounds_m.lower[{axis}]",
                    "normalized asset with a footprint origin must contain its origin",
                    source,
                )
            continue
        if abs(bounds.lower[axis] + bounds.upper[axis]) > 2 * NORMALIZED_TOLERANCE_M:
            raise field_error(
                f"{path}.bounds_m.lower[{axis}]",
                "normalized asset must be centred on its origin in X and Y",
                source,
            )
