"""The provider interface: what a role asks for (``AssetQuery``), what a provider lists
(``AssetCandidate``) and what it hands back once a package is copied, verified and snapshotted
(``PreparedAsset``), with the context and lease fence of that preparation. Implementations
live in ``runtime/assets``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from domain.asset_descriptor import AssetDescriptor
from domain.asset_fields import (
    FrozenMap,
    JsonScalar,
    check_keys,
    decode_attributes,
    decode_names,
    nonempty_str,
    require_mapping,
)
from domain.canonical import canonical_json
from domain.limits import MeshLimits


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
        mapping = require_mapping(value, path, source)
        check_keys(
            mapping, path, source,
            optional=("category", "attributes", "capabilities", "preferred_categories"),
        )
        category = mapping.get("category")
        if category is not None:
            category = nonempty_str(category, f"{path}.category", source)
        query = object.__new__(cls)
        object.__setattr__(query, "category", category)
        attributes = decode_attributes(mapping.get("attributes", {}), f"{path}.attributes", source)
        object.__setattr__(query, "attributes", attributes)
        object.__setattr__(
            query,
            "capabilities",
            decode_names(mapping.get("capabilities", []), f"{path}.capabilities", source),
        )
        object.__setattr__(
            query,
            "preferred_categories",
            decode_names(
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
