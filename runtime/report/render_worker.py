"""Render worker (its own process): one PNG per asset snapshot, MuJoCo offscreen.

Reads a JSON spec on stdin (``width``, ``height``, ``items`` {key: {snapshot, png}}),
writes each PNG and prints one JSON line {key: "ok" | reason}. Run only through
``runtime.report.thumbnails`` (which starts it fresh, with MUJOCO_GL set).

The asset is drawn the way the cameras draw it in episodes: its visual mesh, materials and
textures come from ``runtime.sim.cameras.visuals`` (OBJ+MTL ``map_Kd``, glTF base colour,
PLY vertex colours), so a thumbnail shows what a recorded frame would. The background is
the segmentation pass's "nothing" pixels painted light grey.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

BACKGROUND = (238, 240, 243)


def _scene(snapshot: Path, width: int, height: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """The compiled one-asset model and its bounds (lower, upper) in metres."""
    import mujoco

    from runtime.assets.snapshot import read_snapshot
    from runtime.sim.cameras.visuals import add_visual, load_visual_parts

    asset = read_snapshot(snapshot)
    parts = load_visual_parts(snapshot / asset.visual_path, asset.content_sha256)
    if not parts:
        raise ValueError(f"{asset.visual_path}: the visual mesh could not be read")
    vertices = np.concatenate([part.vertices for part in parts])
    lower, upper = vertices.min(axis=0), vertices.max(axis=0)
    spec = mujoco.MjSpec()
    spec.visual.global_.offwidth = width
    spec.visual.global_.offheight = height
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    spec.visual.headlight.diffuse = [0.45, 0.45, 0.45]
    spec.visual.headlight.specular = [0.05, 0.05, 0.05]
    radius = max(float(np.linalg.norm(upper - lower)) / 2, 1e-3)
    spec.worldbody.add_light(
        type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, dir=[-0.5, 0.5, -1.0],
        pos=[radius * 3, -radius * 3, radius * 5], diffuse=[0.5, 0.5, 0.5],
        specular=[0.1, 0.1, 0.1], castshadow=False,
    )
    add_visual(spec, spec.worldbody.add_body(name="asset"), "asset", parts)
    return spec.compile(), lower, upper


def _render(snapshot: Path, width: int, height: int, png: Path) -> None:
    import mujoco

    from runtime.sim.cameras.contact_sheet import png_bytes

    model, lower, upper = _scene(snapshot, width, height)
    model.vis.quality.offsamples = 4
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    camera = mujoco.MjvCamera()
    camera.lookat[:] = (lower + upper) / 2
    camera.distance = max(math.dist(lower, upper) / 2, 1e-3) * 3.2
    camera.azimuth, camera.elevation = 135.0, -25.0
    with mujoco.Renderer(model, height=height, width=width) as renderer:
        renderer.update_scene(data, camera=camera)
        pixels = renderer.render()
        renderer.enable_segmentation_rendering()
        segments = renderer.render()
    image = np.array(pixels, dtype=np.uint8)
    image[segments[..., 0] < 0] = BACKGROUND
    png.write_bytes(png_bytes(image))


def main() -> int:
    spec = json.loads(sys.stdin.read())
    answers: dict[str, str] = {}
    for key, item in spec["items"].items():
        try:
            _render(Path(item["snapshot"]), int(spec["width"]), int(spec["height"]),
                    Path(item["png"]))
            answers[key] = "ok"
        except Exception as error:  # noqa: BLE001 - each asset's reason goes in the report
            answers[key] = f"{type(error).__name__}: {' '.join(str(error).split())}"[:300]
    sys.stdout.write(json.dumps(answers) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
