"""Byte-deterministic writers for the mesh formats we accept.

The demo catalog and the cache's derived collision pieces must produce identical
bytes on every machine and trimesh version (both are content-addressed), so we do
not use exporters whose headers or float formatting may change; these formats are
simple enough to write.
"""

from __future__ import annotations

import json
import struct

import numpy as np

__all__ = ["glb_bytes", "obj_bytes", "ply_bytes", "stl_bytes"]


def obj_bytes(vertices: np.ndarray, faces: np.ndarray, *, comment: str = "") -> bytes:
    """Deterministic Wavefront OBJ text (shortest round-trip floats, 1-based faces)."""
    lines = [f"# {comment}"] if comment else []
    points = np.asarray(vertices, dtype=np.float64).tolist()  # Python floats: repr round-trips
    lines.extend(f"v {x!r} {y!r} {z!r}" for x, y, z in points)
    lines.extend(
        f"f {a} {b} {c}" for a, b, c in (np.asarray(faces, dtype=np.int64) + 1).tolist()
    )
    return ("\n".join(lines) + "\n").encode("ascii")


def stl_bytes(vertices: np.ndarray, faces: np.ndarray) -> bytes:
    """Binary STL (float32): 80-byte header, count, then normal + 3 vertices per face."""
    tris = np.asarray(vertices, dtype=np.float64)[np.asarray(faces)]
    normals = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    lengths = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, lengths, out=np.zeros_like(normals), where=lengths > 0)
    header = b"assetcast demo catalog binary STL".ljust(80, b" ")
    out = [header, struct.pack("<I", len(tris))]
    for normal, tri in zip(normals, tris, strict=True):
        out.append(struct.pack("<12fH", *normal, *tri.reshape(-1), 0))
    return b"".join(out)


def ply_bytes(vertices: np.ndarray, faces: np.ndarray) -> bytes:
    """Binary little-endian PLY with float32 vertices and uint8-counted int32 faces."""
    verts = np.asarray(vertices, dtype="<f4")
    tris = np.asarray(faces, dtype="<i4")
    header = (
        "ply\nformat binary_little_endian 1.0\ncomment assetcast demo catalog\n"
        f"element vertex {len(verts)}\nproperty float x\nproperty float y\nproperty float z\n"
        f"element face {len(tris)}\nproperty list uchar int vertex_indices\nend_header\n"
    ).encode("ascii")
    body = [verts.tobytes()]
    for tri in tris:
        body.append(struct.pack("<B3i", 3, *tri))
    return header + b"".join(body)


def _pad(data: bytes, fill: bytes) -> bytes:
    return data + fill * (-len(data) % 4)


def glb_bytes(vertices: np.ndarray, faces: np.ndarray) -> bytes:
    """Minimal glTF 2.0 binary: one mesh, float32 positions, uint32 indices, no transforms."""
    positions = np.asarray(vertices, dtype="<f4")
    indices = np.asarray(faces, dtype="<u4").reshape(-1)
    pos_bytes, idx_bytes = positions.tobytes(), indices.tobytes()
    document = {
        "asset": {"version": "2.0", "generator": "assetcast demo catalog"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1, "mode": 4}]}],
        "accessors": [
            {
                "bufferView": 0, "componentType": 5126, "count": len(positions), "type": "VEC3",
                "min": [float(v) for v in positions.min(axis=0)],
                "max": [float(v) for v in positions.max(axis=0)],
            },
            {"bufferView": 1, "componentType": 5125, "count": len(indices), "type": "SCALAR"},
        ],
        "bufferViews": [
            {"buffer": 0, "byteOffset": 0, "byteLength": len(pos_bytes), "target": 34962},
            {
                "buffer": 0, "byteOffset": len(pos_bytes), "byteLength": len(idx_bytes),
                "target": 34963,
            },
        ],
        "buffers": [{"byteLength": len(pos_bytes) + len(idx_bytes)}],
    }
    json_chunk = _pad(json.dumps(document, sort_keys=True, separators=(",", ":")).encode(), b" ")
    bin_chunk = _pad(pos_bytes + idx_bytes, b"\x00")
    total = 12 + 8 + len(json_chunk) + 8 + len(bin_chunk)
    return b"".join(
        [
            struct.pack("<4sII", b"glTF", 2, total),
            struct.pack("<I4s", len(json_chunk), b"JSON"), json_chunk,
            struct.pack("<I4s", len(bin_chunk), b"BIN\x00"), bin_chunk,
        ]
    )
