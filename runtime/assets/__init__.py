"""Asset providers, the verified content-addressed cache and the procedural demo catalog.

The names below are loaded on first use (PEP 562): importing one submodule, e.g.
``runtime.assets.snapshot`` for ``verify``, must not load the cache's mesh stack
(trimesh, scipy) with it.
"""

from __future__ import annotations

from runtime.lazy_exports import lazy_exports

_EXPORTS = {
    "DirectoryAssetProvider": "runtime.assets.providers",
    "ExplicitAssetProvider": "runtime.assets.providers",
    "prepare_package": "runtime.assets.cache",
    "provider_from_description": "runtime.assets.providers",
    "rank_candidates": "runtime.assets.providers",
    "read_snapshot": "runtime.assets.snapshot",
    "verify_prepared_asset": "runtime.assets.snapshot",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
