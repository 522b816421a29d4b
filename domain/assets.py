"""Asset contracts: the value types every layer exchanges about object assets.

Descriptors arrive from files written by people and tools we do not control, and
they feed content digests and geometric relation checks. So decoding is strict:
an unknown field, a non-finite number or an impossible region is refused with a
one-line ``AssetValidationError`` naming the field (and the file when known),
instead of being "repaired" into something that silently changes what a run did.

Everything here is pure (no file I/O); providers and the cache live in
``runtime/assets``. One module per part: ``asset_fields`` (strict JSON decoding),
``asset_geometry`` (boxes, regions, apertures and their rules), ``asset_descriptor`` (the
descriptor), ``asset_sources`` (the provider interface); this module is the one import
every layer uses.
"""

from domain.asset_descriptor import AssetDescriptor
from domain.asset_fields import FrozenMap, JsonScalar
from domain.asset_geometry import (
    NORMALIZED_TOLERANCE_M,
    REGION_TOLERANCE_M,
    Bounds3D,
    PouringGeometry,
)
from domain.asset_sources import (
    AssetCandidate,
    AssetProvider,
    AssetQuery,
    PreparationContext,
    PreparedAsset,
    PublishFence,
)

__all__ = [
    "NORMALIZED_TOLERANCE_M",
    "REGION_TOLERANCE_M",
    "AssetCandidate",
    "AssetDescriptor",
    "AssetProvider",
    "AssetQuery",
    "Bounds3D",
    "FrozenMap",
    "JsonScalar",
    "PouringGeometry",
    "PreparationContext",
    "PreparedAsset",
    "PublishFence",
]
