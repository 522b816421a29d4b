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
#: A stated mass whose density (over the collision volume) falls outside this range is
#: probably in the wrong unit: grams for kilograms gives 1000 times too heavy.
PLAUSIBLE_DENSITY_KG_M3 = (5.0, 25_000.0)


def _density_warning(asset: PreparedAsset, volume_m3: float) -> str | None:
    physics = asset.descriptor.physics
    if physics is None or physics.mass_kg is None or volume_m3 <= 0:
        return None
    density = physics.mass_kg / volume_m3
    low, high = PLAUSIBLE_DENSITY_KG_M3
    if low <= density <= high:
        return None
    hint = "was it given in grams?" if density > high else "is that the mass in kg?"
    return (
        f"physics.mass_kg {physics.mass_kg:g} kg over a collision volume of "
        f"{volume_m3 * 1e6:.3g} cm^3 is a density of {density:.3g} kg/m^3, outside "
        f"{low:g}-{high:g}: {hint}"
    )


def _thickness(piece: trimesh.Trimesh) -> float:
    """Smallest extent of the piece's minimum-volume oriented box (a tilted plate too)."""
    try:
        extents = piece.bounding_box_oriented.primitive.extents
    except Exception:  # noqa: BLE001 - degenerate hull: fall back to the axis-aligned box
        extents = piece.extents
    return float(np.min(extents))


def package_warnings(asset: PreparedAsset) -> list[str]:
    """One line per problem: unknown capability names, thin-shell collision pieces, a mass
    implying an implausible density."""
    warnings = [
        warning
        for name in asset.descriptor.capabilities
        if (warning := unknown_capability_warning(name)) is not None
    ]
    volume = 0.0
    for rel in asset.collision_pieces:
        piece = trimesh.load(
            str(Path(asset.snapshot_dir) / rel), file_type="obj", force="mesh", process=False
        )
        try:
            volume += float(piece.convex_hull.volume)
        except Exception:  # noqa: BLE001 - a degenerate piece adds no volume
            pass
        thickness = _thickness(piece)
        if thickness < THIN_SHELL_M:
            warnings.append(
                f"collision piece {Path(rel).name} is a thin shell ({thickness * 1000:.2g} mm "
                "thick): the simulator collides it as a plate that thin, which fingers and "
                "objects can pass through or tunnel into; give the package a closed, solid "
                "collision mesh (`assetcast catalog import` welds separate faces into one)"
            )
    density = _density_warning(asset, volume)
    if density is not None:
        warnings.append(density)
    return warnings
