"""Exactly the given packages (folders or their ``asset.catalog.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from domain.assets import AssetCandidate, AssetQuery, PreparationContext, PreparedAsset
from runtime.assets.package import MANIFEST_NAME
from runtime.assets.providers.materialize import materialize_package
from runtime.assets.providers.ranking import ListingStats, listing, rank_candidates


class ExplicitAssetProvider:
    """The given packages, in given order (ties of the ranking keep it without a seed)."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        dirs = []
        for raw in paths:
            path = Path(raw).absolute()
            dirs.append(path.parent if path.name == MANIFEST_NAME else path)
        self.package_dirs = tuple(dirs)
        self.last_listing: ListingStats | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "explicit", "paths": [str(p) for p in self.package_dirs]}

    def candidates(
        self, query: AssetQuery | None, limit: int, *, seed: int | None = None
    ) -> list[AssetCandidate]:
        listed = [listing(str(p), p) for p in self.package_dirs]
        self.last_listing = ListingStats(len(listed))
        return rank_candidates(listed, query, limit, seed)

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
        return materialize_package(candidate, context)
