"""The asset descriptor: what a package claims about its asset (id, category, attributes,
capabilities, geometry, physics, provenance), decoded strictly from its JSON and compared by
its canonical form, so the same claims always give the same digest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.asset_fields import (
    JsonScalar,
    check_keys,
    decode_attributes,
    decode_names,
    field_error,
    freeze_json,
    nonempty_str,
    require_mapping,
    thaw_json,
)
from domain.asset_geometry import Bounds3D, PouringGeometry, check_geometry
from domain.asset_physics import AssetPhysics
from domain.canonical import canonical_json

_DESCRIPTOR_FIELDS = (
    "asset_id",
    "category",
    "attributes",
    "capabilities",
    "bounds_m",
    "container_region",
    "support_region",
    "provenance",
    "normalized",
    "physics",
)


@dataclass(frozen=True, eq=False)
class AssetDescriptor:
    """What a package claims about its asset. Equality and hashing use the canonical dict."""

    asset_id: str
    category: str
    attributes: Mapping[str, JsonScalar] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    bounds_m: Bounds3D | None = None
    container_region: Bounds3D | None = None
    support_region: Bounds3D | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    normalized: bool = False
    physics: AssetPhysics | None = None

    def __post_init__(self) -> None:
        # Route constructor input through the same strict decoder as files.
        checked = AssetDescriptor.from_dict(self.to_dict())
        for name in _DESCRIPTOR_FIELDS:
            object.__setattr__(self, name, getattr(checked, name))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AssetDescriptor):
            return NotImplemented
        return canonical_json(self.to_dict()) == canonical_json(other.to_dict())

    def __hash__(self) -> int:
        return hash(canonical_json(self.to_dict()))

    @property
    def pouring(self) -> PouringGeometry | None:
        value = self.provenance.get("pouring")
        if value is None:
            return None
        return PouringGeometry.from_dict(thaw_json(value), path="descriptor.provenance.pouring")

    def to_dict(self) -> dict[str, Any]:
        def box(value: Bounds3D | dict | None) -> Any:
            if value is None or isinstance(value, dict):
                return value
            return value.to_dict()

        out: dict[str, Any] = {
            "asset_id": self.asset_id,
            "category": self.category,
            "attributes": dict(self.attributes),
            "capabilities": list(self.capabilities),
            "bounds_m": box(self.bounds_m),
            "container_region": box(self.container_region),
            "support_region": box(self.support_region),
            "provenance": thaw_json(self.provenance),
            "normalized": self.normalized,
        }
        if self.physics is not None:  # absent, not null: older assets keep their identity
            physics = self.physics
            out["physics"] = physics if isinstance(physics, dict) else physics.to_dict()
        return out

    @classmethod
    def from_dict(
        cls, value: Any, *, path: str = "descriptor", source: str | None = None
    ) -> AssetDescriptor:
        """Strictly decode a descriptor; ``source`` (a file) is prefixed to every error."""
        mapping = require_mapping(value, path, source)
        check_keys(
            mapping, path, source, required=("asset_id", "category"),
            optional=_DESCRIPTOR_FIELDS[2:],
        )
        asset_id = nonempty_str(mapping["asset_id"], f"{path}.asset_id", source)
        category = nonempty_str(mapping["category"], f"{path}.category", source)
        attributes = decode_attributes(mapping.get("attributes", {}), f"{path}.attributes", source)
        capabilities = decode_names(mapping.get("capabilities", []), f"{path}.capabilities", source)
        boxes: dict[str, Bounds3D | None] = {}
        for name in ("bounds_m", "container_region", "support_region"):
            raw = mapping.get(name)
            boxes[name] = (
                None
                if raw is None
                else Bounds3D.from_dict(raw, path=f"{path}.{name}", source=source)
            )
        provenance_raw = require_mapping(
            mapping.get("provenance", {}), f"{path}.provenance", source
        )
        provenance = freeze_json(provenance_raw, f"{path}.provenance", source)
        if provenance.get("pouring") is not None:
            PouringGeometry.from_dict(
                provenance_raw["pouring"], path=f"{path}.provenance.pouring", source=source
            )
        normalized = mapping.get("normalized", False)
        if not isinstance(normalized, bool):
            raise field_error(f"{path}.normalized", "expected true or false", source)
        check_geometry(boxes, normalized, provenance.get("origin"), path, source)
        physics = None
        if mapping.get("physics") is not None:
            physics = AssetPhysics.from_dict(
                mapping["physics"], path=f"{path}.physics", source=source
            )
        descriptor = object.__new__(cls)
        for name, item in (
            ("asset_id", asset_id),
            ("category", category),
            ("attributes", attributes),
            ("capabilities", capabilities),
            ("provenance", provenance),
            ("normalized", normalized),
            ("physics", physics),
            *boxes.items(),
        ):
            object.__setattr__(descriptor, name, item)
        return descriptor
