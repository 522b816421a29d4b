"""Asset contracts: the value types every layer exchanges about object assets.

Descriptors arrive from files written by people and tools we do not control, and
they feed content digests and geometric relation checks. So decoding is strict:
an unknown field, a non-finite number or an impossible region is refused with a
one-line ``AssetValidationError`` naming the field (and the file when known),
instead of being "repaired" into something that silently changes what a run did.

Everything here is pure (no file I/O); providers and the cache live in
``runtime/assets``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from domain.asset_physics import AssetPhysics
from domain.canonical import canonical_json
from domain.errors import AssetValidationError
from domain.fields import forbidden_character
from domain.limits import MeshLimits

JsonScalar = str | int | float | bool

#: Tolerance for "lies within" comparisons between declared boxes (metres).
REGION_TOLERANCE_M = 1e-9
#: Tolerance for the "origin at the bottom centre" claim of ``normalized: true``.
NORMALIZED_TOLERANCE_M = 1e-6

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


class FrozenMap(Mapping[str, Any]):
    """Read-only, hashable, picklable mapping (``MappingProxyType`` cannot be copied)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))


def _fail(path: str, message: str, source: str | None) -> AssetValidationError:
    where = f"{source}: " if source else ""
    return AssetValidationError(f"{where}{path}: {message}")


def _require_mapping(value: Any, path: str, source: str | None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected an object, got {type(value).__name__}", source)
    for key in value:
        if not isinstance(key, str):
            raise _fail(path, f"keys must be strings, got {key!r}", source)
    return value


def _check_keys(
    value: Mapping[str, Any],
    path: str,
    source: str | None,
    *,
    required: Iterable[str] = (),
    optional: Iterable[str] = (),
) -> None:
    required = tuple(required)
    allowed = set(required) | set(optional)
    for key in sorted(value):
        if key not in allowed:
            raise _fail(f"{path}.{key}", "unknown field", source)
    for key in required:
        if key not in value:
            raise _fail(f"{path}.{key}", "required field is missing", source)


def _finite(value: Any, path: str, source: str | None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, f"expected a number, got {type(value).__name__}", source)
    number = float(value)
    if not math.isfinite(number):
        raise _fail(path, f"must be finite, got {value!r}", source)
    return number


def _nonempty_str(value: Any, path: str, source: str | None) -> str:
    """A name (asset id, category, capability): printed in tables, so no control chars."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, "expected a nonempty string", source)
    bad = forbidden_character(value)
    if bad is not None:
        raise _fail(path, f"must not contain control characters (found {bad!r})", source)
    return value


def _freeze_json(value: Any, path: str, source: str | None) -> Any:
    """Validate a JSON value (finite numbers, string keys) and make it immutable."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return value if isinstance(value, int) else _finite(value, path, source)
    if isinstance(value, Mapping):
        _require_mapping(value, path, source)
        return FrozenMap(
            {k: _freeze_json(v, f"{path}.{k}", source) for k, v in sorted(value.items())}
        )
    if isinstance(value, list | tuple):
        return tuple(_freeze_json(v, f"{path}[{i}]", source) for i, v in enumerate(value))
    raise _fail(path, f"not a JSON value: {type(value).__name__}", source)


def _thaw_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw_json(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw_json(v) for v in value]
    return value


def _attributes(value: Any, path: str, source: str | None) -> Mapping[str, JsonScalar]:
    mapping = _require_mapping(value, path, source)
    out: dict[str, JsonScalar] = {}
    for key in sorted(mapping):
        item = mapping[key]
        if not key:
            raise _fail(path, "attribute names must be nonempty", source)
        _nonempty_str(key, f"{path}.{key!r}", source)
        if isinstance(item, float):
            item = _finite(item, f"{path}.{key}", source)
        elif not isinstance(item, str | int | bool):
            raise _fail(
                f"{path}.{key}",
                f"attribute values must be str, int, float or bool, got {type(item).__name__}",
                source,
            )
        out[key] = item
    return FrozenMap(out)


def _names(
    value: Any, path: str, source: str | None, *, what: str = "capability"
) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise _fail(path, f"expected a list of strings, got {type(value).__name__}", source)
    seen: set[str] = set()
    out: list[str] = []
    for i, item in enumerate(value):
        name = _nonempty_str(item, f"{path}[{i}]", source)
        if name in seen:
            raise _fail(f"{path}[{i}]", f"duplicate {what} {name!r}", source)
        seen.add(name)
        out.append(name)
    return tuple(out)


def _triple(value: Any, path: str, source: str | None) -> tuple[float, float, float]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise _fail(path, "expected a list of 3 numbers", source)
    x, y, z = (_finite(v, f"{path}[{i}]", source) for i, v in enumerate(value))
    return (x, y, z)


@dataclass(frozen=True)
class Bounds3D:
    """Axis-aligned box in the package frame (metres); ``lower <= upper`` per axis."""

    lower: tuple[float, float, float]
    upper: tuple[float, float, float]

    def __post_init__(self) -> None:
        self._validate("bounds", None)

    def _validate(self, path: str, source: str | None) -> None:
        lower = _triple(self.lower, f"{path}.lower", source)
        upper = _triple(self.upper, f"{path}.upper", source)
        for axis in range(3):
            if lower[axis] > upper[axis]:
                raise _fail(
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
        mapping = _require_mapping(value, path, source)
        _check_keys(mapping, path, source, required=("lower", "upper"))
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
            raise _fail(path, "needs mouth_radius_m or opening_radius_m", source)
        for name in ("mouth_radius_m", "opening_radius_m"):
            value = getattr(self, name)
            if value is None:
                continue
            radius = _finite(value, f"{path}.{name}", source)
            if radius <= 0:
                raise _fail(f"{path}.{name}", f"must be positive, got {value!r}", source)
            object.__setattr__(self, name, radius)
        _nonempty_str(self.evidence, f"{path}.evidence", source)

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
        mapping = _require_mapping(value, path, source)
        _check_keys(
            mapping, path, source, required=("evidence",),
            optional=("mouth_radius_m", "opening_radius_m"),
        )
        geometry = object.__new__(cls)
        object.__setattr__(geometry, "mouth_radius_m", mapping.get("mouth_radius_m"))
        object.__setattr__(geometry, "opening_radius_m", mapping.get("opening_radius_m"))
        object.__setattr__(geometry, "evidence", mapping["evidence"])
        geometry._validate(path, source)
        return geometry


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
        return PouringGeometry.from_dict(_thaw_json(value), path="descriptor.provenance.pouring")

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
            "provenance": _thaw_json(self.provenance),
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
        mapping = _require_mapping(value, path, source)
        _check_keys(
            mapping, path, source, required=("asset_id", "category"),
            optional=_DESCRIPTOR_FIELDS[2:],
        )
        asset_id = _nonempty_str(mapping["asset_id"], f"{path}.asset_id", source)
        category = _nonempty_str(mapping["category"], f"{path}.category", source)
        attributes = _attributes(mapping.get("attributes", {}), f"{path}.attributes", source)
        capabilities = _names(mapping.get("capabilities", []), f"{path}.capabilities", source)
        boxes: dict[str, Bounds3D | None] = {}
        for name in ("bounds_m", "container_region", "support_region"):
            raw = mapping.get(name)
            boxes[name] = (
                None
                if raw is None
                else Bounds3D.from_dict(raw, path=f"{path}.{name}", source=source)
            )
        provenance_raw = _require_mapping(
            mapping.get("provenance", {}), f"{path}.provenance", source
        )
        provenance = _freeze_json(provenance_raw, f"{path}.provenance", source)
        if provenance.get("pouring") is not None:
            PouringGeometry.from_dict(
                provenance_raw["pouring"], path=f"{path}.provenance.pouring", source=source
            )
        normalized = mapping.get("normalized", False)
        if not isinstance(normalized, bool):
            raise _fail(f"{path}.normalized", "expected true or false", source)
        _check_geometry(boxes, normalized, provenance.get("origin"), path, source)
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


def _check_geometry(
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
        raise _fail(
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
                raise _fail(f"{path}.{name}.lower[{axis}]", "lies outside bounds_m", source)
            if region.upper[axis] > bounds.upper[axis] + REGION_TOLERANCE_M:
                raise _fail(f"{path}.{name}.upper[{axis}]", "lies outside bounds_m", source)
    if not normalized:
        return
    if bounds is None:
        raise _fail(f"{path}.bounds_m", "normalized: true requires bounds_m", source)
    if abs(bounds.lower[2]) > NORMALIZED_TOLERANCE_M:
        raise _fail(
            f"{path}.bounds_m.lower[2]",
            "normalized asset must have its origin at the bottom (lower z = 0)",
            source,
        )
    for axis in (0, 1):
        if origin == "footprint":
            if not bounds.lower[axis] - NORMALIZED_TOLERANCE_M <= 0 <= (
                bounds.upper[axis] + NORMALIZED_TOLERANCE_M
            ):
                raise _fail(
                    f"{path}.bounds_m.lower[{axis}]",
                    "normalized asset with a footprint origin must contain its origin",
                    source,
                )
            continue
        if abs(bounds.lower[axis] + bounds.upper[axis]) > 2 * NORMALIZED_TOLERANCE_M:
            raise _fail(
                f"{path}.bounds_m.lower[{axis}]",
                "normalized asset must be centred on its origin in X and Y",
                source,
            )


@dataclass(frozen=True, eq=False)
class AssetQuery:
    """What a role asks a provider for; ``category=None`` means every category.

    ``preferred_categories`` is a ranking hint, never a filter: the category names a task's
    aliases make equivalent to the role's category. A listing with aliases asks for every
    category (providers do not know the task's aliases), and a provider that truncates to
    ``limit`` keeps these first, so a small cap does not drop the aliased assets."""

    category: str | None = None
    attributes: Mapping[str, JsonScalar] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    preferred_categories: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        checked = AssetQuery.from_dict(self.to_dict())
        for name in ("category", "attributes", "capabilities", "preferred_categories"):
            object.__setattr__(self, name, getattr(checked, name))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AssetQuery):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(canonical_json(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "category": self.category,
            "attributes": dict(self.attributes),
            "capabilities": list(self.capabilities),
        }
        if self.preferred_categories:  # absent when empty: a task's digest does not change
            out["preferred_categories"] = list(self.preferred_categories)
        return out

    @classmethod
    def from_dict(
        cls, value: Any, *, path: str = "query", source: str | None = None
    ) -> AssetQuery:
        mapping = _require_mapping(value, path, source)
        _check_keys(
            mapping, path, source,
            optional=("category", "attributes", "capabilities", "preferred_categories"),
        )
        category = mapping.get("category")
        if category is not None:
            category = _nonempty_str(category, f"{path}.category", source)
        query = object.__new__(cls)
        object.__setattr__(query, "category", category)
        attributes = _attributes(mapping.get("attributes", {}), f"{path}.attributes", source)
        object.__setattr__(query, "attributes", attributes)
        object.__setattr__(
            query,
            "capabilities",
            _names(mapping.get("capabilities", []), f"{path}.capabilities", source),
        )
        object.__setattr__(
            query,
            "preferred_categories",
            _names(
                mapping.get("preferred_categories", []), f"{path}.preferred_categories", source,
                what="category",
            ),
        )
        return query


@dataclass(frozen=True)
class AssetCandidate:
    """A listing entry: enough to rank and to materialize later.

    ``descriptor`` is the provisional descriptor parsed from the catalog file at
    listing time. It is ``None`` when that file could not be parsed; the reason is
    kept in ``listing_error`` and ``materialize`` will fail with the real error, so
    a broken package becomes a recorded rejection instead of a listing crash.
    """

    candidate_id: str
    locator: str
    descriptor: AssetDescriptor | None
    listing_error: str | None = None


class PublishFence(Protocol):
    """The session that publishes a file: ``check`` raises (``SessionLost``) unless it still
    holds the run's lease; ``tag`` names its temporary files so nobody else deletes them."""

    tag: str

    def check(self) -> None: ...


@dataclass(frozen=True)
class PreparationContext:
    """Where prepared snapshots live (``<cache_dir>/<content_sha256>/``), how much geometry
    one package may load (the run's limits), and the session whose lease fences their
    publication (None outside a run, e.g. ``catalog check``).

    ``staging`` (set only in a preparation worker process): a new snapshot is built and
    verified in its temporary folder but not published; the folder's path is appended here,
    and the process holding the lease makes a whole batch of them durable with one sync,
    then verifies, fences and publishes each one.
    """

    cache_dir: str
    limits: MeshLimits = field(default_factory=MeshLimits)
    fence: PublishFence | None = None
    staging: list[str] | None = None


@dataclass(frozen=True, eq=False)
class PreparedAsset:
    """A verified package snapshot in the cache, identified by its content digest.

    ``candidate_id`` and ``source_locator`` name the acquisition that created the
    snapshot (a later identical package reuses it and gets these values back).
    """

    candidate_id: str
    content_sha256: str
    descriptor: AssetDescriptor
    snapshot_dir: str
    visual_path: str
    collision_path: str | None
    files: Mapping[str, str]
    collision_pieces: tuple[str, ...]
    derived_files: Mapping[str, str]
    source_locator: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", FrozenMap(dict(sorted(self.files.items()))))
        object.__setattr__(
            self, "derived_files", FrozenMap(dict(sorted(self.derived_files.items())))
        )
        object.__setattr__(self, "collision_pieces", tuple(self.collision_pieces))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PreparedAsset):
            return NotImplemented
        return self.snapshot_dir == other.snapshot_dir and self.snapshot_dict() == (
            other.snapshot_dict()
        )

    def __hash__(self) -> int:
        return hash((self.content_sha256, self.snapshot_dir))

    @property
    def asset_id(self) -> str:
        return self.descriptor.asset_id

    @property
    def identity(self) -> dict[str, str]:
        return {"asset_id": self.asset_id, "content_sha256": self.content_sha256}

    def snapshot_dict(self) -> dict[str, Any]:
        """The exact content of ``.assetcast/snapshot.json`` (see docs/INTERFACES.md)."""
        return {
            "schema_version": 1,
            "content_sha256": self.content_sha256,
            "candidate_id": self.candidate_id,
            "descriptor": self.descriptor.to_dict(),
            "visual_path": self.visual_path,
            "collision_path": self.collision_path,
            "files": dict(self.files),
            "collision_pieces": list(self.collision_pieces),
            "derived_files": dict(self.derived_files),
            "source_locator": self.source_locator,
        }


@runtime_checkable
class AssetProvider(Protocol):
    """A source of candidate assets for one role (local folders, procedural catalogs)."""

    def describe(self) -> dict[str, Any]:
        """JSON description from which ``provider_from_description`` rebuilds it."""
        ...

    def candidates(self, query: AssetQuery, limit: int) -> Iterable[AssetCandidate]:
        """At most ``limit`` candidates, exact category matches first.

        A provider that samples also takes ``seed: int`` as a keyword (preparation passes
        one derived from the run's seed when the signature names it): ties are then
        ordered by the seed, so a cap draws from the whole catalog, the same seed the same
        sample."""
        ...

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
        """Copy, verify and snapshot the candidate's package into the cache."""
        ...
