"""Render worker (its own process): one PNG per asset snapshot, MuJoCo offscreen.

Reads a JSON spec on stdin (``width``, ``height``, ``items`` {key: {snapshot, png}}),
writes each PNG and prints one JSON line {key: "ok" | reason}. Run only through
``runtime.report.thumbnails`` (which starts it fresh, with MUJOCO_GL set).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any


def _mesh_file(snapshot: Path, scratch: Path) -> tuple[Path, Any]:
    """The asset's visual mesh as STL (MuJoCo reads STL; packages may hold GLB/PLY/...)."""
    import trimesh

    from runtime.assets.snapshot import read_snapshot

    asset = read_snapshot(snapshot)
    mesh = trimesh.load(snapshot / asset.visual_path, force="mesh")
    target = scratch / f"{snapshot.name}.stl"
    mesh.export(target)
    return target, mesh.bounds


def _render(mesh_path: Path, bounds: Any, width: int, height: int, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image
    import mujoco

    lower, upper = bounds
    center = [(a + b) / 2 for a, b in zip(lower, upper, strict=True)]
    radius = max(math.dist(lower, upper) / 2, 1e-3)
    xml = f"""<mujoco>
  <visual><global offwidth="{width}" offheight="{height}"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.6 0.6 0.6"/></visual>
  <asset><mesh name="asset" file="{mesh_path}"/></asset>
  <worldbody>
    <light pos="{center[0] + radius * 3} {center[1] - radius * 3} {center[2] + radius * 5}"
           dir="-0.5 0.5 -1" directional="true"/>
    <geom type="mesh" mesh="asset" rgba="0.55 0.68 0.85 1"/>
  </worldbody>
</mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    camera = mujoco.MjvCamera()
    camera.lookat[:] = center
    camera.distance = radius * 3.2
    camera.azimuth, camera.elevation = 135.0, -25.0
    with mujoco.Renderer(model, height=height, width=width) as renderer:
        renderer.update_scene(data, camera=camera)
        pixels = renderer.render()
    matplotlib.image.imsave(png, pixels, format="png", metadata={"Software": None})


def main() -> int:
    spec = json.loads(sys.stdin.read())
    answers: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for key, item in spec["items"].items():
            try:
                mesh_path, bounds = _mesh_file(Path(item["snapshot"]), Path(scratch))
                _render(mesh_path, bounds, int(spec["width"]), int(spec["height"]),
                        Path(item["png"]))
                answers[key] = "ok"
            except Exception as error:  # noqa: BLE001 - each asset's reason goes in the report
                answers[key] = f"{type(error).__name__}: {' '.join(str(error).split())}"[:300]
    sys.stdout.write(json.dumps(answers) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
