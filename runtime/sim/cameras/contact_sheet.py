"""A contact sheet: one PNG that shows what every camera saw during an episode.

One row per camera and modality, ``columns`` frames evenly spaced from the first to the last.
Depth is drawn grey (near is bright, nothing hit is black), segmentation in a fixed palette
(background black). The PNG writer is a few lines of zlib so the sheet needs no imaging
library and the same frames give the same bytes.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from runtime.sim.cameras.reader import EpisodeFrames

_PALETTE = np.array(
    [
        [0, 0, 0], [150, 120, 90], [90, 90, 110], [230, 60, 50], [60, 140, 230],
        [90, 200, 90], [240, 200, 50], [200, 90, 220], [70, 210, 210], [250, 140, 40],
        [140, 140, 140], [255, 255, 255],
    ],
    dtype=np.uint8,
)
_GAP = 2


def png_bytes(image: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of ``image`` (H, W, 3) uint8."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    height, width, _ = image.shape
    rows = np.concatenate([np.zeros((height, 1), dtype=np.uint8), image.reshape(height, -1)], 1)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def colourize(modality: str, frame: np.ndarray) -> np.ndarray:
    """A frame of any modality as (H, W, 3) uint8 for people to look at."""
    if modality == "rgb":
        return frame
    if modality == "depth":
        hit = frame > 0
        grey = np.zeros(frame.shape, dtype=np.uint8)
        if hit.any():
            near, far = float(frame[hit].min()), float(frame[hit].max())
            scale = (far - frame[hit].astype(np.float64)) / max(far - near, 1.0)
            grey[hit] = (55 + 200 * scale).astype(np.uint8)
        return np.repeat(grey[..., None], 3, axis=2)
    return _PALETTE[np.asarray(frame, dtype=np.int64) % len(_PALETTE)]


def contact_sheet(frames: EpisodeFrames, columns: int = 8) -> np.ndarray:
    """The sheet as an (H, W, 3) image (see the module doc)."""
    rows = []
    for camera in frames.cameras.values():
        for modality, stack in camera.frames.items():
            count = len(stack)
            picks = np.unique(np.linspace(0, count - 1, min(columns, count)).round().astype(int))
            tiles = [colourize(modality, stack[i]) for i in picks]
            height, width = tiles[0].shape[:2]
            row = np.full((height, columns * (width + _GAP), 3), 255, dtype=np.uint8)
            for column, tile in enumerate(tiles):
                row[:, column * (width + _GAP): column * (width + _GAP) + width] = tile
            rows.append(row)
    if not rows:
        return np.full((1, 1, 3), 255, dtype=np.uint8)
    width = max(r.shape[1] for r in rows)
    padded = [
        np.pad(r, ((0, _GAP), (0, width - r.shape[1]), (0, 0)), constant_values=255) for r in rows
    ]
    return np.concatenate(padded, axis=0)
