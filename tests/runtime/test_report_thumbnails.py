"""Asset thumbnails in the report show the package's own textures and colours (they are
rendered with the cameras' visuals module, in a fresh process)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from domain.assets import PreparationContext
from runtime.assets.cache import prepare_package
from runtime.report.render_worker import BACKGROUND
from runtime.report.thumbnails import THUMBNAIL_PX, render_thumbnails
from tests.runtime.camera_fixtures import write_coloured_ply_package, write_cube_package


def _snapshot(root: Path, name: str, write: object) -> str:
    package = root / "packages" / name
    write(package)  # type: ignore[operator]
    asset = prepare_package(package, candidate_id=name, locator=str(package),
                            context=PreparationContext(cache_dir=str(root / "cache")))
    return asset.snapshot_dir


def _object_pixels(path: Path) -> np.ndarray:
    image = np.asarray(Image.open(io.BytesIO(path.read_bytes())).convert("RGB")).astype(int)
    assert image.shape == (THUMBNAIL_PX[1], THUMBNAIL_PX[0], 3)
    corners = image[[0, 0, -1, -1], [0, -1, 0, -1]]
    assert (corners == BACKGROUND).all(), "the background is painted, not left black"
    pixels = image[(image != BACKGROUND).any(axis=2)]
    assert len(pixels) > 0.05 * image.shape[0] * image.shape[1], "the asset fills the view"
    return pixels


def test_thumbnails_show_textures_and_vertex_colours(tmp_path: Path) -> None:
    snapshots = {
        "textured": _snapshot(tmp_path, "textured", lambda d: write_cube_package(d, textured=True)),
        "plain": _snapshot(tmp_path, "plain", lambda d: write_cube_package(d, textured=False)),
        "ply": _snapshot(tmp_path, "ply", lambda d: write_coloured_ply_package(d, (200, 40, 40))),
    }
    results = render_thumbnails(snapshots, tmp_path / "thumbs")
    assert all(isinstance(path, Path) for path in results.values()), results
    textured = _object_pixels(results["textured"])  # type: ignore[arg-type]
    plain = _object_pixels(results["plain"])  # type: ignore[arg-type]
    ply = _object_pixels(results["ply"])  # type: ignore[arg-type]
    # The checker texture is saturated red and green; the untextured twin is neutral grey.
    assert ((textured[:, 0] - textured[:, 1]) > 60).mean() > 0.2  # red squares
    assert ((textured[:, 1] - textured[:, 0]) > 60).mean() > 0.2  # green squares
    assert np.median(plain.max(axis=1) - plain.min(axis=1)) < 10
    assert np.median(ply[:, 0] - ply[:, 1]) > 80  # PLY vertex colour (200, 40, 40)
