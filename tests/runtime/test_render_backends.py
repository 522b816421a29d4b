"""Both offscreen backends render the demo scene, each in a fresh process, to the same pixels.

OSMesa and EGL are two ways into Mesa's llvmpipe here, and the images are byte-identical
on these machines (Mesa 22.3, measured); the tolerance below (at most 0.5% of RGB values
off by more than 2 of 255; labels and depth equal on 99.9% of pixels) only allows for a
different Mesa build on another machine. Each backend renders in its own new interpreter:
a GL backend is chosen once per process, and a process must never render with a context
inherited through fork.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

RENDER = """
import sys
import numpy as np
from runtime.logging import configure_logging
configure_logging(level="warning")
from runtime.collection.demo_run import demo_task_path
from runtime.sim.cameras import ensure_backend
from runtime.sim.cameras.rendering import CameraRenderer
from runtime.sim.cameras.rig import environment_labels, mount_bodies
from runtime.sim.environment import TaskEnvironment
from runtime.taskfile import load_task

task = load_task(demo_task_path())
env = TaskEnvironment(task, demo_task_path().parent)
env.reset(None)
images = {}
# The renderer in this fresh process itself (not the render server): this process's
# backend is the one under test.
renderer = CameraRenderer(
    env.model, task.cameras, environment_labels(env), mount_bodies(task.cameras, env.model)
)
for camera in task.cameras:
    for modality, image in renderer.render(env.data, camera).images.items():
        images[f"{camera.name}.{modality}"] = image
renderer.close()
env.close()
print(ensure_backend())
np.savez(sys.argv[1], **images)
"""


def _osmesa_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("ASSETCAST_REQUIRE_OSMESA") == "1"


def render_in_fresh_process(backend: str, out: Path) -> dict[str, np.ndarray]:
    environment = {
        k: v for k, v in os.environ.items()
        if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "ASSETCAST_RENDER_BACKEND")
    }
    environment.update(MUJOCO_GL=backend, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RENDER), str(out)],
        env=environment, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == backend, done.stdout
    with np.load(out) as archive:
        return {name: archive[name] for name in archive.files}


def test_osmesa_renders_what_egl_renders(tmp_path: Path) -> None:
    if not ctypes.util.find_library("OSMesa"):
        if _osmesa_required():
            pytest.fail("libOSMesa is missing (CI installs it with .ci/osmesa)")
        pytest.skip("libOSMesa is not installed (apt-get install libosmesa6)")
    egl = render_in_fresh_process("egl", tmp_path / "egl.npz")
    osmesa = render_in_fresh_process("osmesa", tmp_path / "osmesa.npz")
    assert set(egl) == set(osmesa) == {
        f"{c}.{m}" for c in ("front", "wrist") for m in ("rgb", "depth", "segmentation")
    }
    for name, image in egl.items():
        other = osmesa[name]
        assert other.shape == image.shape and other.dtype == image.dtype, name
        if name.endswith(".rgb"):
            off = np.abs(image.astype(np.int16) - other.astype(np.int16)) > 2
            assert off.mean() <= 0.005, (name, off.mean())
            assert image.std() > 10, "the frame must show a scene, not a flat colour"
        else:
            assert (image == other).mean() >= 0.999, name
