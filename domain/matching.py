"""Choose one prepared asset per role so that every query and relation holds.

Matching decides which assets a batch collects with, so it must be reproducible from the
ledger alone: the same requirements, pools and seed give the same set no matter in which
order providers listed their candidates. It must also stay bounded: the domain of each role
is capped (``max_candidates_per_role``) and the depth-first search counts every attempted
extension against ``max_search_nodes``, so it never walks the Cartesian product. When no set
is found, ``MatchingError`` says why in a form whose size does not grow with combinations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from domain.assets import REGION_TOLERANCE_M, AssetDescriptor, PreparedAsset
from domain.canonical import sha256_json
from domain.errors import AssetcastError
from domain.requirements import AssetRequirements, Relation, RoleRequirement

#: At most this many per-candidate rejections are kept verbatim; the rest are counted.
MAX_REJECTION_DETAILS = 100

NO_CANDIDATES = "no_candidates"
SEARCH_BUDGET = "search_budget"
CANDIDATE_BUDGET = "candidate_budget"


@dataclass(frozen=True)
class Rejection:
    """Why one candidate (or a whole role, when ``asset_id`` is None) was not used."""

    role: str
    asset_id: str | None
    code: str
    detail: str
    target_role: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "asset_id": self.asset_id,
            "code": self.code,
            "detail": self.detail,
            "target_role": self.target_role,
        }


@dataclass(frozen=True)
class ResolvedAssetSet:
    """One asset per role; ``set_id`` digests seed, requirements and identities (no paths)."""

    assets: Mapping[str, PreparedAsset]
    seed: int
    requirements_digest: str
    set_id: str
    search_nodes: int

    def identities(self) -> dict[str, dict[str, str]]:
        return {role: self.assets[role].identity for role in sorted(self.assets)}


class MatchingError(AssetcastError):
    """No asset set satisfies the requirements within the budgets (structured diagnostics)."""

    def __init__(
        self,
        message: str,
        *,
        seed: int,
        rejections: Sequence[Rejection],
        rejections_total: int,
        role_summaries: Mapping[str, Any],
        search_nodes: int,
        budget_exhausted: bool,
        budget: Mapping[str, Any],
    ) -> None:
        super().__init__(message)
        self.seed = seed
        self.rejections = tuple(rejections)
        self.rejections_total = rejections_total
        self.role_summaries = dict(role_summaries)
        self.search_nodes = search_nodes
        self.budget_exhausted = budget_exhausted
        self.budget = dict(budget)

    def to_dict(self) -> dict[str, Any]:
        return {
            "error_type": type(self).__name__,
            "detail": str(self),
            "seed": self.seed,
            "rejections": [item.to_dict() for item in self.rejections],
            "rejections_total": self.rejections_total,
            "role_summaries": self.role_summaries,
            "search_nodes": self.search_nodes,
            "budget_exhausted": self.budget_exhausted,
            "budget": self.budget,
        }


# --------------------------------------------------------------------------- per-asset filters


def _same_value(wanted: Any, actual: Any) -> bool:
    """Exact-typed equality: ``True`` does not match ``1`` and ``1`` does not match ``1.0``."""
    return type(wanted) is type(actual) and wanted == actual


def _query_failures(
    requirement: RoleRequirement, requirements: AssetRequirements, descriptor: AssetDescriptor
) -> list[tuple[str, str]]:
    """(code, detail) for every way the descriptor misses the role's own query."""
    failures: list[tuple[str, str]] = []
    query = requirement.query
    if query.category is not None:
        wanted = requirements.canonical_category(query.category)
        actual = requirements.canonical_category(descriptor.category)
        if wanted != actual:
            failures.append(
                ("category_mismatch", f"category {descriptor.category!r} is not {wanted!r}")
            )
    for key in sorted(query.attributes):
        wanted_value = query.attributes[key]
        if key not in descriptor.attributes:
            failures.append(("attribute_mismatch", f"attribute {key!r} is missing"))
        elif not _same_value(wanted_value, descriptor.attributes[key]):
            failures.append(
                (
                    "attribute_mismatch",
                    f"attribute {key!r} is {descriptor.attributes[key]!r}, not {wanted_value!r}",
                )
            )
    missing = [name for name in query.capabilities if name not in descriptor.capabilities]
    if missing:
        failures.append(("missing_capability", f"lacks capabilities {missing}"))
    if not descriptor.normalized:
        failures.append(("not_normalized", "descriptor does not declare normalized: true"))
    if descriptor.bounds_m is None:
        failures.append(("missing_bounds", "descriptor has no bounds_m"))
    elif requirement.max_extent_m is not None:
        extent = max(descriptor.bounds_m.extents)
        if extent > requirement.max_extent_m:
            failures.append(
                (
                    "extent_exceeded",
                    f"max extent {extent:.6g} m exceeds max_extent_m {requirement.max_extent_m}",
                )
            )
    return failures


def _relation_prerequisites(
    relation: Relation, role: str, descriptor: AssetDescriptor
) -> list[tuple[str, str]]:
    """What one side of a relation needs on its own, checked before any search."""
    failures: list[tuple[str, str]] = []
    is_object = relation.object_role == role
    pouring = descriptor.pouring
    if relation.kind == "fits_inside" and not is_object and descriptor.container_region is None:
        failures.append(("missing_relation_geometry", "fits_inside target has no container_region"))
    elif relation.kind == "supported_by" and not is_object and descriptor.support_region is None:
        failures.append(("missing_relation_geometry", "supported_by target has no support_region"))
    elif relation.kind == "pours_into":
        needed = ("pour_source", "antipodal_grasp") if is_object else ("container",)
        missing = [name for name in needed if name not in descriptor.capabilities]
        if missing:
            failures.append(("missing_capability", f"pours_into needs capabilities {missing}"))
        radius = "mouth_radius_m" if is_object else "opening_radius_m"
        if pouring is None or getattr(pouring, radius) is None:
            failures.append(
                ("missing_pouring_geometry", f"pours_into needs provenance.pouring.{radius}")
            )
    return failures


# --------------------------------------------------------------------------- relation geometry


def check_relation(
    relation: Relation, obj: AssetDescriptor, target: AssetDescriptor
) -> tuple[str, str] | None:
    """``None`` when the pair satisfies ``relation``, else (code, detail)."""
    clearance = relation.clearance_m
    if relation.kind == "pours_into":
        source, sink = obj.pouring, target.pouring
        if source is None or sink is None or None in (source.mouth_radius_m, sink.opening_radius_m):
            return ("missing_pouring_geometry", "pouring radii are not declared")
        assert source.mouth_radius_m is not None and sink.opening_radius_m is not None
        if source.mouth_radius_m + clearance > sink.opening_radius_m + REGION_TOLERANCE_M:
            return (
                "pouring_aperture_too_small",
                f"mouth {source.mouth_radius_m:.6g} m + clearance {clearance:.6g} m exceeds "
                f"opening {sink.opening_radius_m:.6g} m",
            )
        return None
    region = target.container_region if relation.kind == "fits_inside" else target.support_region
    if obj.bounds_m is None or region is None:
        return ("missing_relation_geometry", f"{relation.kind} needs object bounds and a region")
    axes = 3 if relation.kind == "fits_inside" else 2
    need = obj.bounds_m.extents
    have = region.extents
    for axis in range(axes):
        if need[axis] + 2 * clearance > have[axis] + REGION_TOLERANCE_M:
            return (
                "relation_does_not_fit",
                f"{relation.kind}: axis {'xyz'[axis]} needs {need[axis] + 2 * clearance:.6g} m, "
                f"region has {have[axis]:.6g} m",
            )
    return None


# --------------------------------------------------------------------------- diagnostics


class _Diagnostics:
    """Collects rejections: a bounded list of details plus exact per-role code counts."""

    def __init__(self, roles: Sequence[str]) -> None:
        self.details: list[Rejection] = []
        self.headlines: list[Rejection] = []
        self.total = 0
        self.codes: dict[str, Counter[str]] = {role: Counter() for role in roles}

    def add(self, rejection: Rejection, *, headline: bool = False) -> None:
        self.total += 1
        self.codes[rejection.role][rejection.code] += 1
        if headline:
            self.headlines.append(rejection)
        elif len(self.details) < MAX_REJECTION_DETAILS:
            self.details.append(rejection)

    def kept(self) -> list[Rejection]:
        """Headlines first; ``add`` already capped the details."""
        return self.headlines + self.details


# --------------------------------------------------------------------------- pools


def _record_key(asset: PreparedAsset) -> tuple[str, str]:
    """Total order among snapshots with equal content, so provenance is reproducible."""
    return (sha256_json(asset.snapshot_dict()), asset.snapshot_dir)


def _ranked_pool(role: str, pool: Sequence[PreparedAsset], seed: int) -> list[PreparedAsset]:
    """Distinct contents, ordered by the seeded rank ``sha256([seed, role, identity])``."""
    chosen: dict[str, PreparedAsset] = {}
    for asset in pool:
        if not isinstance(asset, PreparedAsset):
            raise TypeError(
                f"pool of role {role!r} holds {type(asset).__name__}, not PreparedAsset"
            )
        current = chosen.get(asset.content_sha256)
        if current is None or _record_key(asset) < _record_key(current):
            chosen[asset.content_sha256] = asset
    return sorted(
        chosen.values(),
        key=lambda item: (sha256_json([seed, role, item.identity]), item.content_sha256),
    )


def _check_int(name: str, value: Any, lower: int) -> int:
    if type(value) is not int or value < lower:
        raise ValueError(f"{name} must be an int >= {lower}, got {value!r}")
    return value


# --------------------------------------------------------------------------- search


class _Search:
    """Depth-first search over fixed role order with lazily cached pair checks."""

    def __init__(
        self,
        order: Sequence[str],
        domains: Mapping[str, Sequence[PreparedAsset]],
        relations: Sequence[Relation],
        max_nodes: int,
        diagnostics: _Diagnostics,
    ) -> None:
        self.order = list(order)
        self.domains = domains
        self.max_nodes = max_nodes
        self.nodes = 0
        self.exhausted = False
        self.diagnostics = diagnostics
        self.cache: dict[tuple[int, str, str], bool] = {}
        position = {role: index for index, role in enumerate(self.order)}
        # relations to check when the role at each depth is assigned (both ends known then)
        self.due: list[list[tuple[int, Relation]]] = [[] for _ in self.order]
        for index, relation in enumerate(relations):
            depth = max(position[relation.object_role], position[relation.target_role])
            self.due[depth].append((index, relation))

    def _holds(self, index: int, relation: Relation, assigned: Mapping[str, PreparedAsset]) -> bool:
        obj = assigned[relation.object_role]
        target = assigned[relation.target_role]
        key = (index, obj.content_sha256, target.content_sha256)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        failure = check_relation(relation, obj.descriptor, target.descriptor)
        self.cache[key] = failure is None
        if failure is not None:
            code, detail = failure
            self.diagnostics.add(
                Rejection(
                    relation.object_role,
                    obj.asset_id,
                    code,
                    f"{detail} (target {target.asset_id!r})",
                    relation.target_role,
                )
            )
        return failure is None

    def run(self) -> dict[str, PreparedAsset] | None:
        assigned: dict[str, PreparedAsset] = {}
        return assigned if self._extend(0, assigned) else None

    def _extend(self, depth: int, assigned: dict[str, PreparedAsset]) -> bool:
        if depth == len(self.order):
            return True
        role = self.order[depth]
        for asset in self.domains[role]:
            if self.nodes >= self.max_nodes:
                self.exhausted = True
                return False
            self.nodes += 1
            assigned[role] = asset
            if all(self._holds(i, rel, assigned) for i, rel in self.due[depth]) and self._extend(
                depth + 1, assigned
            ):
                return True
            del assigned[role]
            if self.exhausted:
                return False
        return False


# --------------------------------------------------------------------------- entry point


def resolve_asset_set(
    requirements: AssetRequirements,
    pools: Mapping[str, Sequence[PreparedAsset]],
    *,
    seed: int,
    max_candidates_per_role: int,
    max_search_nodes: int,
) -> ResolvedAssetSet:
    """Deterministically pick one prepared asset per role, or raise ``MatchingError``."""
    _check_int("seed", seed, 0)
    _check_int("max_candidates_per_role", max_candidates_per_role, 1)
    _check_int("max_search_nodes", max_search_nodes, 1)
    unknown = sorted(set(pools) - set(requirements.roles))
    if unknown:
        raise ValueError(f"pools name roles the requirements do not declare: {unknown}")
    roles = sorted(requirements.roles)
    diagnostics = _Diagnostics(roles)
    domains: dict[str, list[PreparedAsset]] = {}
    summaries: dict[str, dict[str, Any]] = {}
    dropped = 0
    for role in roles:
        requirement = requirements.roles[role]
        ranked = _ranked_pool(role, pools.get(role, ()), seed)
        kept, excess = ranked[:max_candidates_per_role], ranked[max_candidates_per_role:]
        for asset in excess:
            dropped += 1
            diagnostics.add(
                Rejection(
                    role,
                    asset.asset_id,
                    CANDIDATE_BUDGET,
                    f"ranked beyond candidates_per_role={max_candidates_per_role}",
                )
            )
        related = [r for r in requirements.relations if role in (r.object_role, r.target_role)]
        domain: list[PreparedAsset] = []
        for asset in kept:
            failures = [
                (code, detail, None)
                for code, detail in _query_failures(requirement, requirements, asset.descriptor)
            ]
            for relation in related:
                other = (
                    relation.target_role if relation.object_role == role else relation.object_role
                )
                failures.extend(
                    (code, detail, other)
                    for code, detail in _relation_prerequisites(relation, role, asset.descriptor)
                )
            for code, detail, other in failures:
                diagnostics.add(Rejection(role, asset.asset_id, code, detail, other))
            if not failures:
                domain.append(asset)
        domains[role] = domain
        summaries[role] = {"candidates": len(ranked), "eligible": len(domain)}

    def fail(message: str, nodes: int, exhausted: bool) -> MatchingError:
        for role in roles:
            summaries[role]["codes"] = dict(sorted(diagnostics.codes[role].items()))
        return MatchingError(
            f"seed {seed}: {message}",
            seed=seed,
            rejections=diagnostics.kept(),
            rejections_total=diagnostics.total,
            role_summaries=summaries,
            search_nodes=nodes,
            budget_exhausted=exhausted,
            budget={
                "max_candidates_per_role": max_candidates_per_role,
                "candidates_dropped": dropped,
                "max_search_nodes": max_search_nodes,
                "search_nodes": nodes,
                "search_exhausted": exhausted,
            },
        )

    empty = [role for role in roles if not domains[role]]
    if empty:
        for role in empty:
            diagnostics.add(
                Rejection(
                    role,
                    None,
                    NO_CANDIDATES,
                    f"{summaries[role]['candidates']} candidates, none eligible",
                ),
                headline=True,
            )
        raise fail(f"no eligible candidates for role(s) {', '.join(empty)}", 0, False)

    order = sorted(roles, key=lambda role: (len(domains[role]), role))
    search = _Search(order, domains, requirements.relations, max_search_nodes, diagnostics)
    found = search.run()
    if found is None:
        if search.exhausted:
            stuck = order[0]
            diagnostics.add(
                Rejection(
                    stuck,
                    None,
                    SEARCH_BUDGET,
                    f"search stopped after max_search_nodes={max_search_nodes} extensions",
                ),
                headline=True,
            )
            raise fail(
                f"search budget exhausted after {search.nodes} nodes without a valid asset set",
                search.nodes,
                True,
            )
        raise fail(
            f"no combination satisfies the relations ({search.nodes} nodes searched)",
            search.nodes,
            False,
        )
    digest = requirements.digest()
    assets = {role: found[role] for role in roles}
    set_id = sha256_json(
        {
            "seed": seed,
            "requirements_digest": digest,
            "assets": {role: assets[role].identity for role in roles},
        }
    )
    return ResolvedAssetSet(
        assets=MappingProxyType(assets),
        seed=seed,
        requirements_digest=digest,
        set_id=set_id,
        search_nodes=search.nodes,
    )
