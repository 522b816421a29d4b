"""Asset providers, the verified content-addressed cache and the procedural demo catalog."""

from runtime.assets.cache import prepare_package
from runtime.assets.providers import (
    DirectoryAssetProvider,
    ExplicitAssetProvider,
    provider_from_description,
    rank_candidates,
)
from runtime.assets.snapshot import read_snapshot, verify_prepared_asset

__all__ = [
    "DirectoryAssetProvider",
    "ExplicitAssetProvider",
    "prepare_package",
    "provider_from_description",
    "rank_candidates",
    "read_snapshot",
    "verify_prepared_asset",
]
