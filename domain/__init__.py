"""assetcast domain package."""
