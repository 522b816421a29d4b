"""assetcast migrations package."""
