"""assetcast runtime package."""
