"""Generate (or check) the Franka Panda's decimated visual meshes.

The Panda's visual meshes in the pinned ``gymnasium-robotics`` wheel have ~134k triangles;
a CPU rasterizer (Mesa llvmpipe) spends its time per triangle, so at the 128-256 px the
cameras record they cost most of an episode while adding no visible detail. This script
reduces each mesh once with quadric edge-collapse decimation (``fast-simplification``, a
small MIT-licensed wrapper of Sven Forstmann's Fast-Quadric-Mesh-Simplification; the
library trimesh's ``simplify_quadric_decimation`` uses) and writes binary STL files into
``runtime/sim/robots/panda_visual/`` with ``manifest.json``: source and output SHA-256,
triangle counts and the generator's settings. The committed files are what the simulator
loads (the runtime never decimates, so frames never depend on a library version);
``--check`` regenerates in memory and fails when any byte differs.

Run: ``.venv/bin/python scripts/decimate_panda_visuals.py [--check]``
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import struct
import sys
from pathlib import Path

import fast_simplification
import numpy as np
import trimesh

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime.sim.robots import panda_visual  # noqa: E402
from runtime.sim.robots.franka_panda import _description_dir  # noqa: E402

# Fraction of each source mesh's triangles kept. The hand is what the wrist camera sees
# closest, so it keeps more.
KEEP_FRACTION = {"hand": 0.2}
DEFAULT_KEEP = 0.05
AGGRESSIVENESS = 3.0  # below the library's 7: fewer flipped faces for a little more time
KEEP_WHOLE_BELOW = 64  # triangles: small parts (screws, caps) are kept as they are
STL_HEADER = b"assetcast: decimated Franka Panda visual mesh (see manifest.json)".ljust(80)


def stl_bytes(vertices: np.ndarray, faces: np.ndarray) -> bytes:
    """Binary STL with float32 vertices and unit face normals, in face order."""
    corners = vertices[faces].astype(np.float32)  # (m, 3, 3)
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    lengths = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.where(lengths > 0, normals / np.where(lengths > 0, lengths, 1), 0)
    record = np.dtype([("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attr", "<u2")])
    rows = np.zeros(len(faces), dtype=record)
    rows["normal"] = normals.astype(np.float32)
    rows["corners"] = corners
    return STL_HEADER + struct.pack("<I", len(faces)) + rows.tobytes()


def _components(mesh: trimesh.Trimesh) -> list[np.ndarray]:
    """Face indices of each connected part, ordered by their smallest face index."""
    labels = trimesh.graph.connected_component_labels(mesh.face_adjacency, len(mesh.faces))
    parts = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    return sorted(parts, key=lambda faces: int(faces[0]))


def decimate(source: Path, keep: float) -> tuple[bytes, int, int]:
    """Each connected part reduced on its own (a shared budget lets the collapses of a big
    shell swallow small parts, flipping their faces), small parts kept whole."""
    mesh = trimesh.load(source, process=False)
    mesh.merge_vertices()  # STL repeats each corner: collapses need shared vertices
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    all_faces = np.asarray(mesh.faces, dtype=np.int32)
    out_vertices, out_faces, offset = [], [], 0
    for part in _components(mesh):
        used, remapped = np.unique(all_faces[part], return_inverse=True)
        part_vertices = vertices[used]
        part_faces = remapped.reshape(-1, 3).astype(np.int32)
        if len(part_faces) >= KEEP_WHOLE_BELOW:
            target = max(KEEP_WHOLE_BELOW // 2, int(round(len(part_faces) * keep)))
            part_vertices, part_faces = fast_simplification.simplify(
                part_vertices, part_faces, target_count=target, agg=AGGRESSIVENESS
            )
        out_vertices.append(np.asarray(part_vertices, dtype=np.float64))
        out_faces.append(np.asarray(part_faces, dtype=np.int64) + offset)
        offset += len(part_vertices)
    faces = np.concatenate(out_faces)
    return stl_bytes(np.concatenate(out_vertices), faces), len(all_faces), len(faces)


def generate() -> tuple[dict[str, bytes], dict]:
    source_dir = _description_dir() / "meshes" / "visual"
    files: dict[str, bytes] = {}
    meshes = {}
    for name in panda_visual.MESH_NAMES:
        source = source_dir / f"{name}.stl"
        keep = KEEP_FRACTION.get(name, DEFAULT_KEEP)
        data, before, after = decimate(source, keep)
        files[f"{name}.stl"] = data
        meshes[name] = {
            "source": f"gymnasium_robotics/envs/assets/kitchen_franka/franka_assets/"
            f"meshes/visual/{name}.stl",
            "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "source_triangles": before,
            "keep_fraction": keep,
            "triangles": after,
            "file": f"{name}.stl",
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    manifest = {
        "schema_version": 1,
        "generator": "scripts/decimate_panda_visuals.py",
        "method": "quadric edge collapse (fast-simplification) per connected part, "
        "vertices merged first",
        "aggressiveness": AGGRESSIVENESS,
        "keep_whole_below": KEEP_WHOLE_BELOW,
        "fast_simplification": importlib.metadata.version("fast-simplification"),
        "gymnasium_robotics": importlib.metadata.version("gymnasium-robotics"),
        "meshes": meshes,
    }
    return files, manifest


def manifest_text(manifest: dict) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args()
    files, manifest = generate()
    directory = panda_visual.DIRECTORY
    if args.check:
        stale = [
            name for name, data in files.items()
            if not (directory / name).is_file() or (directory / name).read_bytes() != data
        ]
        if (directory / "manifest.json").read_text(encoding="utf-8") != manifest_text(manifest):
            stale.append("manifest.json")
        for name in stale:
            sys.stderr.write(f"decimate_panda_visuals: {name} differs from a fresh generation\n")
        return 1 if stale else 0
    for name, data in files.items():
        (directory / name).write_bytes(data)
    (directory / "manifest.json").write_text(manifest_text(manifest), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
