"""Local asset providers behind the one ``domain.assets.AssetProvider`` interface, one module
per kind: a catalog folder (``directory``), several merged (``merged``), an explicit list of
packages (``explicit``); ``ranking`` orders and samples their listings, ``description``
rebuilds one from what a run recorded."""

from runtime.assets.providers.description import LocalProvider, provider_from_description
from runtime.assets.providers.directory import DirectoryAssetProvider
from runtime.assets.providers.explicit import ExplicitAssetProvider
from runtime.assets.providers.merged import MergedAssetProvider
from runtime.assets.providers.ranking import ListingStats, rank_candidates, sample_key

__all__ = [
    "DirectoryAssetProvider",
    "ExplicitAssetProvider",
    "ListingStats",
    "LocalProvider",
    "MergedAssetProvider",
    "provider_from_description",
    "rank_candidates",
    "sample_key",
]
