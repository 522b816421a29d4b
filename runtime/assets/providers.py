"""Local asset providers: a catalog folder, or an explicit list of packages.

Listing is cheap and forgiving, preparation is strict. ``candidates`` parses each
catalog file only to rank it; a package whose catalog file cannot be parsed is
still listed (``descriptor=None``, ``listing_error`` set) so that preparing it fails
and the failure is recorded as a rejection of that one candidate, instead of one
broken package aborting the listing of a whole catalog.

Ranking: exact category matches first, then everything else (the task may alias
categories, and the matcher decides). Within each group, packages that carry every
requested capability and attribute come first, so a large catalog truncated to
``limit`` keeps the packages most likely to match even when the task's aliases force
a category-free query. Ties keep the provider's sorted order; never more than ``limit``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from domain.assets import AssetCandidate, AssetQuery, PreparationContext, PreparedAsset
from domain.errors import AssetValidationError
from domain.fields import forbidden_character
from runtime.assets.cache import prepare_package
from runtime.assets.package import MANIFEST_NAME, read_manifest


def _checked_id(candidate_id: str) -> str:
    """A candidate id is a folder name or path that goes into the log and onto terminals:
    one with a control character (a newline, ESC) is refused, not recorded."""
    bad = forbidden_character(candidate_id)
    if bad is not None:
        raise AssetValidationError(
            f"candidate {candidate_id!r}: folder name contains a control character ({bad!r})"
        )
    return candidate_id


def _listing(candidate_id: str, package_dir: Path) -> AssetCandidate:
    _checked_id(candidate_id)
    try:
        descriptor = read_manifest(package_dir).descriptor
    except AssetValidationError as exc:
        return AssetCandidate(candidate_id, str(package_dir), None, listing_error=str(exc))
    return AssetCandidate(candidate_id, str(package_dir), descriptor)


def _relevance(candidate: AssetCandidate, query: AssetQuery | None) -> tuple[bool, bool, bool]:
    """How well a listing answers ``query``: category, then capabilities, then attributes.

    Attributes compare exact-typed (``True`` is not ``1``), as the matcher does.
    """
    descriptor = candidate.descriptor
    if descriptor is None or query is None:
        return (False, False, False)
    category = query.category is not None and descriptor.category == query.category
    capabilities = set(query.capabilities) <= set(descriptor.capabilities)
    attributes = all(
        name in descriptor.attributes
        and type(descriptor.attributes[name]) is type(value)
        and descriptor.attributes[name] == value
        for name, value in query.attributes.items()
    )
    return (category, capabilities, attributes)


def rank_candidates(
    candidates: Iterable[AssetCandidate], query: AssetQuery | None, limit: int
) -> list[AssetCandidate]:
    """Most relevant first (stable within equal relevance); at most ``limit``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a non-negative int, got {limit!r}")
    listed = list(candidates)
    listed.sort(key=lambda c: _relevance(c, query), reverse=True)
    return listed[:limit]


def _materialize(candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
    return prepare_package(
        candidate.locator,
        candidate_id=candidate.candidate_id,
        locator=candidate.locator,
        context=context,
    )


class DirectoryAssetProvider:
    """Every package (folder holding ``asset.catalog.json``) below ``root``, sorted by path.

    The search does not descend into a package (its sub-folders belong to it) and
    does not follow symlinked folders.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()

    def describe(self) -> dict[str, Any]:
        return {"kind": "directory", "root": str(self.root)}

    def package_dirs(self) -> list[Path]:
        if not self.root.is_dir():
            raise AssetValidationError(f"{self.root}: catalog folder does not exist")
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            if MANIFEST_NAME in filenames:
                found.append(Path(dirpath))
                dirnames[:] = []
            else:
                dirnames.sort()
        return sorted(found, key=lambda p: p.relative_to(self.root).as_posix())

    def _candidate_id(self, package_dir: Path) -> str:
        rel = package_dir.relative_to(self.root).as_posix()
        return self.root.name if rel == "." else rel

    def candidates(self, query: AssetQuery | None, limit: int) -> list[AssetCandidate]:
        listed = (_listing(self._candidate_id(p), p) for p in self.package_dirs())
        return rank_candidates(listed, query, limit)

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
        return _materialize(candidate, context)


class ExplicitAssetProvider:
    """Exactly the given packages (folders or their ``asset.catalog.json``), in given order."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        dirs = []
        for raw in paths:
            path = Path(raw).absolute()
            dirs.append(path.parent if path.name == MANIFEST_NAME else path)
        self.package_dirs = tuple(dirs)

    def describe(self) -> dict[str, Any]:
        return {"kind": "explicit", "paths": [str(p) for p in self.package_dirs]}

    def candidates(self, query: AssetQuery | None, limit: int) -> list[AssetCandidate]:
        listed = (_listing(str(p), p) for p in self.package_dirs)
        return rank_candidates(listed, query, limit)

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
        return _materialize(candidate, context)


def provider_from_description(
    description: Any,
) -> DirectoryAssetProvider | ExplicitAssetProvider:
    """Rebuild a provider from its ``describe()`` output (used when resuming a run)."""
    if not isinstance(description, dict):
        raise AssetValidationError("provider description: expected an object")
    kind = description.get("kind")
    expected = {"directory": {"kind", "root"}, "explicit": {"kind", "paths"}}.get(kind)
    if expected is None:
        raise AssetValidationError(f"provider description: kind: unknown provider {kind!r}")
    for key in sorted(set(description) ^ expected):
        state = "unknown field" if key in description else "required field is missing"
        raise AssetValidationError(f"provider description: {key}: {state}")
    if kind == "directory":
        root = description["root"]
        if not isinstance(root, str) or not root:
            raise AssetValidationError("provider description: root: expected a path string")
        return DirectoryAssetProvider(root)
    paths = description["paths"]
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise AssetValidationError("provider description: paths: expected a list of path strings")
    return ExplicitAssetProvider(paths)
