"""assetcast store package."""
