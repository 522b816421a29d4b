"""The Panda's decimated visual meshes: committed bytes, what the model loads, physics kept."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from runtime.sim.errors import SceneBuildError
from runtime.sim.robots import franka_panda, panda_visual

REPO = Path(__file__).resolve().parents[2]


def test_every_committed_mesh_matches_its_manifest_digest() -> None:
    meshes = panda_visual.manifest()["meshes"]
    assert set(meshes) == set(panda_visual.MESH_NAMES)
    for name, entry in meshes.items():
        data = (panda_visual.DIRECTORY / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert len(data) == 84 + 50 * entry["triangles"]  # binary STL
        assert entry["triangles"] < entry["source_triangles"]


def test_the_source_meshes_are_the_ones_the_manifest_was_made_from() -> None:
    source_dir = franka_panda._description_dir() / "meshes" / "visual"
    for name, entry in panda_visual.manifest()["meshes"].items():
        digest = hashlib.sha256((source_dir / f"{name}.stl").read_bytes()).hexdigest()
        assert digest == entry["source_sha256"], name


def test_the_model_renders_the_decimated_set_with_unchanged_physics() -> None:
    decimated = franka_panda._robot_spec().compile()
    original = franka_panda._robot_spec("original").compile()
    assert decimated.nmeshface < original.nmeshface / 8
    assert original.nmeshface > 130_000
    for field in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "dof_armature",
                  "jnt_range", "actuator_gainprm"):
        assert np.array_equal(getattr(decimated, field), getattr(original, field)), field
    colliding = (original.geom_contype > 0) | (original.geom_conaffinity > 0)
    assert colliding.any()
    for field in ("geom_size", "geom_rbound", "geom_aabb", "geom_pos", "geom_quat"):
        assert np.array_equal(getattr(decimated, field)[colliding],
                              getattr(original, field)[colliding]), field


def test_an_altered_mesh_is_refused_by_name(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    for entry in panda_visual.manifest()["meshes"].values():
        (tmp_path / entry["file"]).write_bytes(
            (panda_visual.DIRECTORY / entry["file"]).read_bytes()
        )
    with (tmp_path / "link3.stl").open("r+b") as handle:
        handle.seek(200)
        handle.write(b"\x01")
    monkeypatch.setattr(panda_visual, "DIRECTORY", tmp_path)
    panda_visual.verified_files.cache_clear()
    try:
        with pytest.raises(SceneBuildError, match=r"link3\.stl: the decimated Panda mesh is "
                                                  r"missing or altered"):
            panda_visual.verified_files()
    finally:
        panda_visual.verified_files.cache_clear()


def test_the_generator_reproduces_the_committed_bytes() -> None:
    pytest.importorskip("fast_simplification")
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "decimate_panda_visuals.py"), "--check"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
