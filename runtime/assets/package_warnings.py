"""What ``catalog check`` warns about in a package that prepared: it will run, but probably
not as its author meant (a capability no query uses, collision that fingers pass through)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh

from domain.assets import PreparedAsset
from domain.capabilities import unknown_capability_warning

#: A convex collision piece thinner than this (metres) is a shell, not a solid.
THIN_SHELL_M = 0.001


def _thickness(piece: trimesh.Trimesh) -> float:
    """Smallest extent of the piece's minimum-volume oriented box (a tilted plate too)."""
    try:
        extents = piece.bounding_box_oriented.primitive.extents
    except Exception:  # noqa: BLE001 - degenerate hull: fall back to the axis-aligned box
        extents = piece.extents
    return float(np.min(extents))


def package_warnings(asset: PreparedAsset) -> list[str]:
    """One line per problem: unknown capability names, thin-shell collision pieces."""
    warnings = [
        warning
        for name in asset.descriptor.capabilities
        if (warning := unknown_capability_warning(name)) is not None
    ]
    for rel in asset.collision_pieces:
        piece = trimesh.load(
            str(Path(asset.snapshot_dir) / rel), file_type="obj", force="mesh", process=False
        )
        thickness = _thickness(piece)
        if thickness < THIN_SHELL_M:
            warnings.append(
                f"collision piece {Path(rel).name} is a thin shell ({thickness * 1000:.2g} mm "
                "thick): the simulator collides it as a plate that thin, which fingers and "
                "objects can pass through or tunnel into; give the package a closed, solid "
                "collision mesh (`assetcast catalog import` welds separate faces into one)"
            )
    return warnings
