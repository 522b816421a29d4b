"""What a task asks of its varying assets: one query per role plus relations between roles.

Requirements are part of a run's identity (their digest goes into every asset-set id), so they
are validated completely on construction and serialize to one canonical form. Category aliases
let a task accept assets that a catalog files under another name (``cube`` -> ``block``); they
must be acyclic so that every name has exactly one canonical category.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from domain import fields as f
from domain.assets import AssetQuery
from domain.canonical import sha256_json
from domain.errors import ConfigError

RELATION_KINDS: tuple[str, ...] = ("fits_inside", "supported_by", "pours_into")
ROOT = "asset_requirements"


def _check_relation(
    kind: Any, object_role: Any, target_role: Any, clearance_m: Any, path: str, source: str | None
) -> None:
    f.text(kind, f.key_path(path, "kind"), source)
    if kind not in RELATION_KINDS:
        f.fail(
            f.key_path(path, "kind"),
            f"unknown relation {kind!r}; expected one of {', '.join(RELATION_KINDS)}",
            source,
        )
    f.text(object_role, f.key_path(path, "object_role"), source)
    f.text(target_role, f.key_path(path, "target_role"), source)
    if object_role == target_role:
        f.fail(f.key_path(path, "target_role"), "must differ from object_role", source)
    f.number(clearance_m, f.key_path(path, "clearance_m"), source, non_negative=True)


@dataclass(frozen=True)
class RoleRequirement:
    """The asset one role needs, and the scene entity whose asset it replaces."""

    role: str
    entity_id: str
    query: AssetQuery
    max_extent_m: float | None = None

    def __post_init__(self) -> None:
        path = f.key_path(f"{ROOT}.roles", str(self.role))
        f.text(self.role, f"{ROOT}.roles", None)
        f.text(self.entity_id, f.key_path(path, "entity_id"), None)
        if self.max_extent_m is not None:
            f.number(self.max_extent_m, f.key_path(path, "max_extent_m"), None, positive=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entity_id": self.entity_id,
            "query": {
                "category": self.query.category,
                "attributes": dict(self.query.attributes),
                "capabilities": list(self.query.capabilities),
            },
            "max_extent_m": self.max_extent_m,
        }


@dataclass(frozen=True)
class Relation:
    """A geometric relation the assets of two roles must satisfy (checked by matching)."""

    kind: str
    object_role: str
    target_role: str
    clearance_m: float = 0.0

    def __post_init__(self) -> None:
        _check_relation(
            self.kind, self.object_role, self.target_role, self.clearance_m, "relation", None
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "object_role": self.object_role,
            "target_role": self.target_role,
            "clearance_m": self.clearance_m,
        }


def _check_aliases(aliases: Mapping[str, str], path: str, source: str | None) -> None:
    for alias, category in aliases.items():
        f.text(alias, path, source)
        f.text(category, f.key_path(path, alias), source)
    for start in sorted(aliases):
        seen = [start]
        name = aliases[start]
        while name in aliases:
            if name in seen:
                cycle = " -> ".join([*seen[seen.index(name) :], name])
                f.fail(f.key_path(path, start), f"alias cycle: {cycle}", source)
            seen.append(name)
            name = aliases[name]


def _check_requirements(
    roles: Mapping[str, RoleRequirement],
    relations: tuple[Relation, ...],
    aliases: Mapping[str, str],
    source: str | None,
) -> None:
    roles_path = f"{ROOT}.roles"
    if not roles:
        f.fail(roles_path, "at least one role is required", source)
    owners: dict[str, str] = {}
    for name, requirement in roles.items():
        if not isinstance(requirement, RoleRequirement) or requirement.role != name:
            f.fail(f.key_path(roles_path, str(name)), "role key and requirement differ", source)
        if requirement.entity_id in owners:
            f.fail(
                f.key_path(f.key_path(roles_path, name), "entity_id"),
                f"entity {requirement.entity_id!r} is already bound to role "
                f"{owners[requirement.entity_id]!r}",
                source,
            )
        owners[requirement.entity_id] = name
    for index, relation in enumerate(relations):
        path = f.index_path(f"{ROOT}.relations", index)
        if not isinstance(relation, Relation):
            f.fail(path, f"expected a Relation, got {f.type_name(relation)}", source)
        for attribute in ("object_role", "target_role"):
            role = getattr(relation, attribute)
            if role not in roles:
                f.fail(f.key_path(path, attribute), f"unknown role {role!r}", source)
    _check_aliases(aliases, f"{ROOT}.category_aliases", source)


@dataclass(frozen=True)
class AssetRequirements:
    """All roles of a task, their relations and the task's category aliases."""

    roles: Mapping[str, RoleRequirement]
    relations: tuple[Relation, ...] = ()
    category_aliases: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "roles", MappingProxyType(dict(self.roles)))
        object.__setattr__(self, "relations", tuple(self.relations))
        aliases = MappingProxyType(dict(self.category_aliases))
        object.__setattr__(self, "category_aliases", aliases)
        _check_requirements(self.roles, self.relations, self.category_aliases, None)

    def canonical_category(self, name: str) -> str:
        """Follow aliases to the category a name stands for (acyclic by construction)."""
        while name in self.category_aliases:
            name = self.category_aliases[name]
        return name

    def to_dict(self) -> dict[str, Any]:
        return {
            "roles": {role: self.roles[role].to_dict() for role in sorted(self.roles)},
            "relations": [relation.to_dict() for relation in self.relations],
            "category_aliases": {
                key: self.category_aliases[key] for key in sorted(self.category_aliases)
            },
        }

    def digest(self) -> str:
        """SHA-256 of the canonical JSON form; part of every asset-set id."""
        return sha256_json(self.to_dict())


def _attribute(value: Any, path: str, source: str | None) -> str | int | float | bool:
    if value is None:
        f.fail(path, "expected a string, number or bool, got null", source)
    return f.scalar(value, path, source)


def _parse_query(value: Any, path: str, source: str | None) -> AssetQuery:
    raw = f.mapping(value, path, source, optional=("category", "attributes", "capabilities"))
    category = f.optional_text(raw.get("category"), f.key_path(path, "category"), source)
    attributes_path = f.key_path(path, "attributes")
    attributes = {
        key: _attribute(item, f.key_path(attributes_path, key), source)
        for key, item in f.string_keyed(raw.get("attributes", {}), attributes_path, source).items()
    }
    capabilities = f.text_list(
        raw.get("capabilities", []), f.key_path(path, "capabilities"), source
    )
    return AssetQuery(category=category, attributes=attributes, capabilities=capabilities)


def _parse_role(role: str, value: Any, path: str, source: str | None) -> RoleRequirement:
    f.text(role, path, source)
    raw = f.mapping(
        value, path, source, required=("entity_id", "query"), optional=("max_extent_m",)
    )
    max_extent = raw.get("max_extent_m")
    return RoleRequirement(
        role=role,
        entity_id=f.text(raw["entity_id"], f.key_path(path, "entity_id"), source),
        query=_parse_query(raw["query"], f.key_path(path, "query"), source),
        max_extent_m=None
        if max_extent is None
        else f.number(max_extent, f.key_path(path, "max_extent_m"), source, positive=True),
    )


def _parse_relation(value: Any, path: str, source: str | None) -> Relation:
    raw = f.mapping(
        value,
        path,
        source,
        required=("kind", "object_role", "target_role"),
        optional=("clearance_m",),
    )
    clearance = raw.get("clearance_m", 0.0)
    _check_relation(raw["kind"], raw["object_role"], raw["target_role"], clearance, path, source)
    return Relation(raw["kind"], raw["object_role"], raw["target_role"], float(clearance))


def parse_requirements(value: Any, source: str | None = None) -> AssetRequirements:
    """Read the ``asset_requirements`` mapping of a task file; errors name the path in it."""
    raw = f.mapping(
        value, ROOT, source, required=("roles",), optional=("relations", "category_aliases")
    )
    roles_path = f"{ROOT}.roles"
    roles = {
        role: _parse_role(role, item, f.key_path(roles_path, str(role)), source)
        for role, item in f.string_keyed(raw["roles"], roles_path, source).items()
    }
    relations_path = f"{ROOT}.relations"
    relations = tuple(
        _parse_relation(item, f.index_path(relations_path, i), source)
        for i, item in enumerate(f.sequence(raw.get("relations", []), relations_path, source))
    )
    aliases_path = f"{ROOT}.category_aliases"
    aliases = dict(f.string_keyed(raw.get("category_aliases", {}), aliases_path, source))
    _check_aliases(aliases, aliases_path, source)
    _check_requirements(roles, relations, aliases, source)
    try:
        return AssetRequirements(roles, relations, aliases)
    except ConfigError as error:  # pragma: no cover - every check above ran with the source
        raise ConfigError(ROOT, str(error), source=source) from error
