"""Small packages and tasks for the camera suites: a textured cube, its untextured twin, and
a vertex-coloured PLY, written byte for byte here so the tests depend on no catalog."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

HALF = 0.03
_CORNERS = [(x, y, z) for z in (0.0, 2 * HALF) for y in (-HALF, HALF) for x in (-HALF, HALF)]
_QUADS = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]


def _cube_obj(textured: bool) -> str:
    lines = ["mtllib mesh.mtl", "usemtl skin"] if textured else []
    lines += [f"v {x} {y} {z}" for x, y, z in _CORNERS]
    if textured:
        lines += ["vt 0 0", "vt 1 0", "vt 1 1", "vt 0 1"]
    for a, b, c, d in _QUADS:
        for tri in ((a, b, c), (a, c, d)):
            corners = [(v, (0, 1, 2, 3)[[a, b, c, d].index(v)]) for v in tri]
            if textured:
                lines.append("f " + " ".join(f"{v + 1}/{t + 1}" for v, t in corners))
            else:
                lines.append("f " + " ".join(str(v + 1) for v, _ in corners))
    return "\n".join(lines) + "\n"


def _checker_png() -> bytes:
    image = np.zeros((32, 32, 3), dtype=np.uint8)
    image[:16, :16] = image[16:, 16:] = (230, 20, 20)
    image[:16, 16:] = image[16:, :16] = (20, 200, 40)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def _catalog(asset_id: str, visual: str) -> str:
    descriptor = {
        "asset_id": asset_id,
        "category": "block",
        "attributes": {},
        "capabilities": ["antipodal_grasp"],
        "bounds_m": {"lower": [-HALF, -HALF, 0.0], "upper": [HALF, HALF, 2 * HALF]},
        "container_region": None,
        "support_region": None,
        "provenance": {"source": "test", "pouring": None},
        "normalized": True,
    }
    return json.dumps({"descriptor": descriptor, "visual_path": visual, "collision_path": None})


def write_cube_package(directory: Path, *, textured: bool) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "mesh.obj").write_text(_cube_obj(textured))
    if textured:
        (directory / "mesh.mtl").write_text("newmtl skin\nKd 1 1 1\nmap_Kd skin.png\n")
        (directory / "skin.png").write_bytes(_checker_png())
    (directory / "asset.catalog.json").write_text(_catalog("cube", "mesh.obj"))
    return directory / "asset.catalog.json"


def write_coloured_ply_package(directory: Path, rgb: tuple[int, int, int]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    faces = [tri for a, b, c, d in _QUADS for tri in ((a, b, c), (a, c, d))]
    header = [
        "ply", "format ascii 1.0", f"element vertex {len(_CORNERS)}", "property float x",
        "property float y", "property float z", "property uchar red", "property uchar green",
        "property uchar blue", f"element face {len(faces)}",
        "property list uchar int vertex_indices",
        "end_header",
    ]
    body = [f"{x} {y} {z} {rgb[0]} {rgb[1]} {rgb[2]}" for x, y, z in _CORNERS]
    body += [f"3 {a} {b} {c}" for a, b, c in faces]
    (directory / "mesh.ply").write_text("\n".join(header + body) + "\n")
    (directory / "asset.catalog.json").write_text(_catalog("ply-cube", "mesh.ply"))
    return directory / "asset.catalog.json"


def top_camera(**changes: Any) -> dict[str, Any]:
    camera = {
        "name": "top",
        "position_m": [0.0, -0.25, 0.3],
        "look_at_m": [0.0, 0.0, 0.03],
        "fovy_deg": 40,
        "width": 64,
        "height": 64,
        "modalities": ["rgb", "depth", "segmentation"],
        "fps": 10,
    }
    camera.update(changes)
    return camera


def single_item_task(package: str | None, cameras: list[dict[str, Any]]) -> dict[str, Any]:
    asset: dict[str, Any] = (
        {"package": package} if package else {"primitive": "box", "size_m": [0.06, 0.06, 0.06]}
    )
    return {
        "task_id": "look_at_item",
        "scene": {
            "table": {"size_m": [0.8, 0.8]},
            "robot": {"kind": "parallel_gripper", "max_opening_m": 0.09},
            "entities": [{"entity_id": "item", "position_m": [0.0, 0.0], "asset": asset}],
        },
        "program": [{"skill": "pick", "object": "item"}],
        "checks": {"initial": ["at_rest"], "final": ["at_rest"]},
        "cameras": cameras,
    }
