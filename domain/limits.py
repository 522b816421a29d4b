"""How much geometry one package may ask preparation to load.

A mesh's cost is set by its face and vertex counts, not its file size (a 250 MB STL of 5M
faces took trimesh past 10 minutes and 19 GB), so both are bounded, checked from file
headers before anything is loaded, and again on what the loader returned. The defaults keep
preparing one package under about a gigabyte and well under a minute on two cores (measured by
``bench/bench_mesh_limits.py``); a run may raise them in its ``CollectionConfig``, which the
log records, so a resumed run applies the same limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import AssetValidationError

DEFAULT_MAX_MESH_FACES = 500_000
DEFAULT_MAX_MESH_VERTICES = 1_500_000  # 3 per face: unindexed triangles (STL, glTF)
DEFAULT_MAX_COLLISION_PIECES = 64


class MeshTooLarge(AssetValidationError):
    """A mesh exceeds a limit; the message names the limit (a recorded rejection)."""


@dataclass(frozen=True)
class MeshLimits:
    """Per-mesh bounds; field names are the ``CollectionConfig`` fields that set them."""

    max_mesh_faces: int = DEFAULT_MAX_MESH_FACES
    max_mesh_vertices: int = DEFAULT_MAX_MESH_VERTICES
    max_collision_pieces: int = DEFAULT_MAX_COLLISION_PIECES

    def check(self, label: str, *, faces: int, vertices: int) -> None:
        """Refuse ``label`` (a mesh file) when a count exceeds its limit."""
        for what, count, name in (
            ("faces", faces, "max_mesh_faces"),
            ("vertices", vertices, "max_mesh_vertices"),
        ):
            limit = getattr(self, name)
            if count > limit:
                raise MeshTooLarge(
                    f"mesh_too_large: {label} has {count} {what}, limit {limit} ({name})"
                )
