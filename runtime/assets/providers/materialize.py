"""Every local provider prepares a candidate the same way: its package folder into the cache."""

from __future__ import annotations

from domain.assets import AssetCandidate, PreparationContext, PreparedAsset
from runtime.assets.cache import prepare_package


def materialize_package(candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
    return prepare_package(
        candidate.locator,
        candidate_id=candidate.candidate_id,
        locator=candidate.locator,
        context=context,
    )
