"""Small generated catalogs for the selection tests: many cheap box packages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import trimesh

from runtime.assets.mesh_writers import obj_bytes


def box_package(
    folder: Path,
    asset_id: str,
    *,
    category: str = "block",
    capabilities: Sequence[str] = ("antipodal_grasp",),
    side: float = 0.03,
) -> Path:
    """A normalized cube package (side ``side`` metres) at ``folder``."""
    box = trimesh.creation.box(extents=[side, side, side])
    box.apply_translation([0, 0, side / 2])
    folder.mkdir(parents=True)
    (folder / "mesh.obj").write_bytes(obj_bytes(box.vertices, box.faces))
    half = side / 2
    descriptor = {
        "asset_id": asset_id,
        "category": category,
        "capabilities": list(capabilities),
        "bounds_m": {"lower": [-half, -half, 0.0], "upper": [half, half, side]},
        "normalized": True,
    }
    (folder / "asset.catalog.json").write_text(
        json.dumps({"descriptor": descriptor, "visual_path": "mesh.obj"}, indent=1)
    )
    return folder


def block_catalog(root: Path, count: int, *, prefix: str = "block") -> Path:
    """``count`` distinct blocks ``<prefix>-01`` ... (sides differ, so identities differ)."""
    for index in range(1, count + 1):
        box_package(root / f"{prefix}-{index:02d}", f"{prefix}-{index:02d}",
                    side=0.02 + index * 0.0005)
    return root
