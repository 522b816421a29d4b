"""A catalog folder: every package (folder holding ``asset.catalog.json``) below a root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from domain.assets import AssetCandidate, AssetQuery, PreparationContext, PreparedAsset
from domain.errors import AssetValidationError
from runtime.assets.package import MANIFEST_NAME
from runtime.assets.providers.materialize import materialize_package
from runtime.assets.providers.ranking import ListingStats, listing, rank_candidates


class DirectoryAssetProvider:
    """Every package below ``root``, listed sorted by path and ranked (``ranking``).

    The search does not descend into a package (its sub-folders belong to it) and
    does not follow symlinked folders.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        self.last_listing: ListingStats | None = None

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

    def candidate_id(self, package_dir: Path) -> str:
        rel = package_dir.relative_to(self.root).as_posix()
        return self.root.name if rel == "." else rel

    def listings(self) -> list[AssetCandidate]:
        """Every package, unranked, in path order."""
        return [listing(self.candidate_id(p), p) for p in self.package_dirs()]

    def candidates(
        self, query: AssetQuery | None, limit: int, *, seed: int | None = None
    ) -> list[AssetCandidate]:
        listed = self.listings()
        self.last_listing = ListingStats(len(listed))
        return rank_candidates(listed, query, limit, seed)

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
        return materialize_package(candidate, context)
