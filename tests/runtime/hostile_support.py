"""Shared pieces of the hostile-input tests: a two-package catalog, the demo task, the CLI in
a subprocess with a timeout (an attack that hangs must fail the test, not the suite)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import trimesh

from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.mesh_writers import obj_bytes
from runtime.demo import demo_task_text

REPO = Path(__file__).resolve().parents[2]
BOX = trimesh.creation.box(extents=[0.04, 0.04, 0.04])
BOX.apply_translation([0, 0, 0.02])
CLI_TIMEOUT_S = 120


def small_catalog(root: Path) -> Path:
    """A catalog of exactly one block and one bin from the demo catalog."""
    demo = root / "demo"
    write_demo_catalog(demo)
    catalog = root / "catalog"
    for name in ("block-040", "bin-180x140"):
        shutil.copytree(demo / name, catalog / name)
    shutil.rmtree(demo)
    return catalog


def descriptor(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "asset_id": "box-40",
        "category": "block",
        "capabilities": ["antipodal_grasp"],
        "bounds_m": {"lower": [-0.02, -0.02, 0.0], "upper": [0.02, 0.02, 0.04]},
        "provenance": {"source": "test"},
        "normalized": True,
    }
    raw.update(changes)
    return raw


def write_package(
    folder: Path,
    *,
    mesh: bytes | None = None,
    visual: str = "mesh.obj",
    manifest: dict[str, Any] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / visual).write_bytes(mesh if mesh is not None else obj_bytes(BOX.vertices, BOX.faces))
    doc = manifest or {"descriptor": descriptor(), "visual_path": visual}
    (folder / "asset.catalog.json").write_text(json.dumps(doc))
    return folder


def binary_stl(triangles: Any, *, claimed: int | None = None) -> bytes:
    """A binary STL of ``triangles`` (n, 3, 3) whose header claims ``claimed`` faces."""
    count = len(triangles) if claimed is None else claimed
    body = b"".join(
        struct.pack("<12fH", 0.0, 0.0, 0.0, *(float(c) for c in tri.reshape(-1)), 0)
        for tri in triangles
    )
    return b"\0" * 80 + struct.pack("<I", count) + body


def task_file(folder: Path, extra_entities: str = "") -> Path:
    """The demo task on the small gantry without cameras (fast, and about inputs only)."""
    text = re.sub(r"\ncameras:\n(?:  .*\n)+", "\n", demo_task_text())
    text = re.sub(r"robot: \{kind: franka_panda\}",
                  "robot: {kind: parallel_gripper, max_opening_m: 0.09}", text)
    if extra_entities:
        text = text.replace("program:", extra_entities + "program:", 1)
    path = folder / "task.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m runtime ARGS`` in a subprocess; a hang raises ``TimeoutExpired``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "ASSETCAST_DB": f"sqlite:///{cwd / 'a.db'}"}
    return subprocess.run(
        [sys.executable, "-m", "runtime", "--log-level", "warning", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False,
    )


def can_mknod() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
