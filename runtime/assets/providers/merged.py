"""Several catalog folders serving one role (``--catalog item=A --catalog item=B``).

The catalogs are listed as one: ids are prefixed with their catalog's folder name (two
catalogs may both hold ``block-01``), and a package present in more than one catalog (same
content identity: descriptor and every file's bytes) is listed once, from the first catalog
given, so a copied catalog neither doubles an asset's chances nor takes two places under the
cap. Identity is only computed where it can collide: packages are grouped by their manifest
bytes and file sizes first, and only groups of two or more are hashed in full.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from domain.assets import AssetCandidate, AssetQuery, PreparationContext, PreparedAsset
from domain.canonical import sha256_hex
from domain.errors import AssetcastError
from runtime.assets.package import (
    MANIFEST_NAME,
    MAX_PACKAGE_BYTES,
    list_package_files,
    read_manifest,
)
from runtime.assets.providers.directory import DirectoryAssetProvider
from runtime.assets.providers.materialize import materialize_package
from runtime.assets.providers.ranking import ListingStats, rank_candidates
from runtime.assets.snapshot import content_digest
from runtime.inputs.reading import read_inside

log = structlog.get_logger(__name__)


def _labels(roots: Sequence[Path]) -> list[str]:
    """Each catalog's id prefix: its folder name, numbered when two share a name."""
    names = [root.name or "catalog" for root in roots]
    return [
        name if names.count(name) == 1 else f"{name}~{names[:index].count(name) + 1}"
        for index, name in enumerate(names)
    ]


def _cheap_key(package_dir: Path) -> tuple[Any, ...] | None:
    """Equal for identical packages, rarely equal otherwise; None when unreadable (such a
    package is never deduplicated: preparing it records the real error)."""
    try:
        files = list_package_files(package_dir)
        manifest = read_inside(
            package_dir, MANIFEST_NAME, limit=MAX_PACKAGE_BYTES, error=AssetcastError
        )
        return (sha256_hex(manifest), tuple((rel, (package_dir / rel).stat().st_size)
                                            for rel in files))
    except (AssetcastError, OSError):
        return None


def content_identity(package_dir: Path) -> str | None:
    """The package's ``content_sha256`` as the cache would compute it, None if unreadable."""
    try:
        digests = {
            rel: sha256_hex(read_inside(
                package_dir, rel, limit=MAX_PACKAGE_BYTES, error=AssetcastError
            ))
            for rel in list_package_files(package_dir)
        }
        return content_digest(read_manifest(package_dir).descriptor, digests)
    except (AssetcastError, OSError):
        return None


class MergedAssetProvider:
    """Every package of every catalog folder, duplicates by content identity listed once."""

    def __init__(self, roots: Sequence[str | Path]) -> None:
        if len(roots) < 2:
            raise ValueError("a merged provider needs at least two catalogs")
        self.catalogs = tuple(DirectoryAssetProvider(root) for root in roots)
        self.labels = _labels([c.root for c in self.catalogs])
        self.duplicates: list[tuple[str, str]] = []  # (skipped id, the id kept), last listing
        self.last_listing: ListingStats | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "directories", "roots": [str(c.root) for c in self.catalogs]}

    def listings(self) -> list[AssetCandidate]:
        listed: list[AssetCandidate] = []
        for label, catalog in zip(self.labels, self.catalogs, strict=True):
            for candidate in catalog.listings():
                listed.append(AssetCandidate(
                    f"{label}/{candidate.candidate_id}", candidate.locator,
                    candidate.descriptor, candidate.listing_error,
                ))
        return self._unique(listed)

    def _unique(self, listed: list[AssetCandidate]) -> list[AssetCandidate]:
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for index, candidate in enumerate(listed):
            key = _cheap_key(Path(candidate.locator))
            if key is not None:
                groups[key].append(index)
        skipped: set[int] = set()
        self.duplicates = []
        for members in groups.values():
            if len(members) < 2:
                continue
            kept: dict[str, int] = {}
            for index in members:
                identity = content_identity(Path(listed[index].locator))
                if identity is None:
                    continue
                if identity in kept:
                    skipped.add(index)
                    self.duplicates.append(
                        (listed[index].candidate_id, listed[kept[identity]].candidate_id)
                    )
                    log.debug(
                        "catalog.duplicate_listed_once", skipped=listed[index].candidate_id,
                        kept=listed[kept[identity]].candidate_id, content_sha256=identity,
                    )
                else:
                    kept[identity] = index
        if skipped:
            log.info("catalog.duplicates_listed_once", count=len(skipped),
                     roots=[str(c.root) for c in self.catalogs])
        return [c for index, c in enumerate(listed) if index not in skipped]

    def candidates(
        self, query: AssetQuery | None, limit: int, *, seed: int | None = None
    ) -> list[AssetCandidate]:
        listed = self.listings()
        self.last_listing = ListingStats(len(listed), len(self.duplicates))
        return rank_candidates(listed, query, limit, seed)

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
        return materialize_package(candidate, context)
