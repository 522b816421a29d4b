"""Cameras in the simulator: what the renderer shows, and refusals before anything records."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from domain.errors import ConfigError
from domain.task import parse_task
from runtime.sim.cameras import CameraRig
from runtime.sim.cameras.rendering import CameraFrame
from runtime.sim.cameras.rig import check_task_cameras, environment_labels, mount_bodies
from runtime.sim.environment import TaskEnvironment
from tests.runtime.camera_fixtures import (
    single_item_task,
    top_camera,
    write_coloured_ply_package,
    write_cube_package,
)

REPO = Path(__file__).resolve().parents[2]
ITEM = 3  # label ids: background, table, robot, then entities in task order


def render_once(base: Path, package: str | None, **camera: Any) -> CameraFrame:
    task = parse_task(single_item_task(package, [top_camera(**camera)]), source="t.yaml")
    env = TaskEnvironment(task, base)
    try:
        env.reset(None)
        with CameraRig(task.cameras) as rig:
            return rig.renderer_for(env).render(env.data, task.cameras[0])
    finally:
        env.close()


def item_colour(frame: CameraFrame) -> np.ndarray:
    mask = frame.images["segmentation"] == ITEM
    assert mask.sum() > 50, "the item must fill part of the image"
    return frame.images["rgb"][mask].astype(float)


def test_textured_package_renders_its_texture(tmp_path: Path) -> None:
    write_cube_package(tmp_path / "textured", textured=True)
    write_cube_package(tmp_path / "plain", textured=False)
    textured = item_colour(render_once(tmp_path, "textured/asset.catalog.json"))
    plain = item_colour(render_once(tmp_path, "plain/asset.catalog.json"))
    # The checker is saturated red and green; the untextured mesh is neutral grey.
    spread = textured.max(axis=1) - textured.min(axis=1)
    assert np.median(spread) > 60
    assert np.median(plain.max(axis=1) - plain.min(axis=1)) < 10
    assert (textured[:, 0] > textured[:, 1] + 60).any()  # red squares
    assert (textured[:, 1] > textured[:, 0] + 60).any()  # green squares


def test_ply_vertex_colours_reach_the_renderer(tmp_path: Path) -> None:
    write_coloured_ply_package(tmp_path / "ply", (20, 40, 230))
    colour = item_colour(render_once(tmp_path, "ply/asset.catalog.json")).mean(axis=0)
    assert colour[2] > colour[0] + 60 and colour[2] > colour[1] + 60


def test_segmentation_and_depth_of_a_still_scene(tmp_path: Path) -> None:
    frame = render_once(tmp_path, None)
    labels = frame.images["segmentation"]
    assert set(np.unique(labels)) >= {1, ITEM}  # table and item in view
    depth = frame.images["depth"].astype(float) / 1000.0
    camera = np.array([0.0, -0.25, 0.3])
    # The item's top face (z = 0.06) is nearer than the table behind it.
    assert np.median(depth[labels == ITEM]) < np.median(depth[labels == 1])
    assert depth[labels == ITEM].min() > (0.3 - 0.06) * 0.5
    assert depth.max() < np.linalg.norm(camera - np.array([0.4, 0.4, 0.0])) + 0.01


def test_fps_must_divide_the_control_rate(tmp_path: Path) -> None:
    task = parse_task(single_item_task(None, [top_camera(fps=7)]), source="t.yaml")
    with pytest.raises(ConfigError) as caught:
        check_task_cameras(task, tmp_path, source="t.yaml")
    assert str(caught.value) == (
        "t.yaml: cameras[0].fps: 7 does not divide the control rate of 50 Hz"
    )


def test_mount_must_name_a_body_of_the_scene(tmp_path: Path) -> None:
    camera = top_camera()
    del camera["position_m"], camera["look_at_m"]
    camera["mount"] = {"body": "wrist_link", "position_m": [0, 0, 0.1], "look_at_m": [0.1, 0, 0]}
    task = parse_task(single_item_task(None, [camera]), source="t.yaml")
    with pytest.raises(ConfigError) as caught:
        check_task_cameras(task, tmp_path, source="t.yaml")
    assert str(caught.value) == (
        "t.yaml: cameras[0].mount.body: no body 'wrist_link' in the compiled scene"
    )


def test_mounted_camera_follows_its_body(tmp_path: Path) -> None:
    camera = top_camera(modalities=["depth"])
    del camera["position_m"], camera["look_at_m"]
    camera["mount"] = {
        "body": "robot_tilt_link", "position_m": [0, 0, 0.1], "quat_wxyz": [1, 0, 0, 0]
    }
    task = parse_task(single_item_task(None, [camera]), source="t.yaml")
    env = TaskEnvironment(task, tmp_path)
    try:
        env.reset(None)
        with CameraRig(task.cameras) as rig:
            renderer = rig.renderer_for(env)
            before = renderer.render(env.data, task.cameras[0]).position_m
            env.move_tcp(None, x=0.1, y=0.05)
            after = renderer.render(env.data, task.cameras[0]).position_m
    finally:
        env.close()
    assert np.allclose(after - before, [0.1, 0.05, 0.0], atol=0.005)


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")
    }
    environment.update(env, PYTHONPATH=str(REPO))
    quiet = "from runtime.logging import configure_logging\nconfigure_logging(level='warning')\n"
    return subprocess.run(
        [sys.executable, "-c", quiet + textwrap.dedent(code)],
        env=environment, capture_output=True, text=True, timeout=120,
    )


def test_a_forced_backend_that_is_missing_names_its_library() -> None:
    """OSMesa is installed in CI (the backends are compared), so its absence is made real
    for this one process: loading any libOSMesa file fails as it does without the package."""
    done = _python(
        """
        import ctypes
        real_cdll = ctypes.CDLL

        def cdll(name, *args, **kwargs):
            if str(name).startswith("libOSMesa"):
                raise OSError(f"{name}: cannot open shared object file")
            return real_cdll(name, *args, **kwargs)

        ctypes.CDLL = cdll
        from runtime.sim.cameras import RenderBackendUnavailable, ensure_backend
        try:
            ensure_backend()
        except RenderBackendUnavailable as error:
            print(error)
        """,
        ASSETCAST_RENDER_BACKEND="osmesa",
    )
    assert done.stdout.strip() == (
        "no offscreen rendering backend: osmesa needs libOSMesa.so.8 (apt-get install libosmesa6)"
    ), done.stderr


def test_a_child_forked_after_rendering_refuses_to_render() -> None:
    done = _python(
        """
        import os
        from runtime.sim.cameras import RenderBackendUnavailable, ensure_backend
        print(ensure_backend())
        pid = os.fork()
        if pid == 0:
            try:
                ensure_backend()
            except RenderBackendUnavailable as error:
                print("child:", error, flush=True)
                os._exit(0)
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        print("status", os.waitstatus_to_exitcode(status))
        """
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "egl", done.stderr
    assert lines[1].startswith("child: this process was forked after an OpenGL context existed")
    assert lines[2] == "status 0"


def test_the_demo_cameras_work_on_the_arm(tmp_path: Path) -> None:
    """The shipped demo task (Franka arm): the wrist camera rides on the hand and sees the
    fingers; the front camera sees both role entities."""
    from runtime.collection.demo_run import demo_task_path
    from runtime.sim.cameras.labels import label_names
    from runtime.taskfile import load_task

    task = load_task(demo_task_path())
    assert task.scene.robot.kind == "franka_panda"
    check_task_cameras(task, demo_task_path().parent, source="task.yaml")
    env = TaskEnvironment(task, demo_task_path().parent)
    try:
        env.reset(None)
        names = label_names([e.entity_id for e in task.scene.entities])
        with CameraRig(task.cameras) as rig:
            renderer = rig.renderer_for(env)
            front, wrist = (renderer.render(env.data, c) for c in task.cameras)
            hand = env.model.body(env.robot.wrist_mount_body).id
            assert np.allclose(wrist.position_m, renderer.pose(task.cameras[1], env.data)[0])
            assert np.linalg.norm(wrist.position_m - env.data.xpos[hand]) < 0.1
    finally:
        env.close()
    front_labels = set(np.unique(front.images["segmentation"]).tolist())
    assert {names.index("entity:item"), names.index("entity:bin")} <= front_labels
    assert (wrist.images["segmentation"] == names.index("robot")).mean() > 0.05  # the fingers


def test_cli_refuses_a_bad_camera_before_recording_anything(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runtime.cli import main
    from runtime.collection.demo_run import gantry_demo_task

    task = gantry_demo_task(tmp_path)
    task.write_text(task.read_text().replace("body: robot_tilt_link", "body: no_such_link"))
    url = f"sqlite:///{tmp_path / 'a.db'}"
    out = tmp_path / "out"
    argv = ["--log-level", "warning", "run", str(task), "--catalog", f"item={catalog}",
            "--catalog", f"bin={catalog}", "--out", str(out), "--db", url]
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: {task}: cameras[1].mount.body: no body 'no_such_link' in the "
        "compiled scene\n"
    )
    assert not out.exists() and not (tmp_path / "a.db").exists()


def test_frustum_culling_drops_geoms_but_no_pixel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Geoms wholly outside a camera's view are dropped before rendering (the Panda's
    high-poly links dominate the cost), yet every image equals an unculled render."""
    from runtime.collection.demo_run import demo_task_path
    from runtime.sim.cameras import rendering
    from runtime.taskfile import load_task

    task = load_task(demo_task_path())
    env = TaskEnvironment(task, demo_task_path().parent)
    culled: list[int] = []
    original = rendering.CameraRenderer._cull

    def counting(self: Any, scene: Any, *args: Any) -> Any:
        labels = original(self, scene, *args)
        none = int(rendering.mujoco.mjtGeom.mjGEOM_NONE)
        culled.append(sum(scene.geoms[i].type == none for i in range(scene.ngeom)))
        return labels

    try:
        env.reset(None)
        # In this process (not the render server) so the culling can be watched.
        renderer = rendering.CameraRenderer(
            env.model, task.cameras, environment_labels(env),
            mount_bodies(task.cameras, env.model),
        )
        try:
            monkeypatch.setattr(rendering.CameraRenderer, "_cull", counting)
            with_culling = [renderer.render(env.data, c) for c in task.cameras]
            renderer.culling = False
            without = [renderer.render(env.data, c) for c in task.cameras]
        finally:
            renderer.close()
    finally:
        env.close()
    assert sum(culled) > 0, "some Panda link must lie outside a demo camera's view"
    for culled_frame, full_frame in zip(with_culling, without, strict=True):
        for modality, image in full_frame.images.items():
            assert np.array_equal(culled_frame.images[modality], image), modality


def test_the_collecting_process_never_holds_a_gl_context_and_survives_a_dead_renderer() -> None:
    """Frames render in the render process: the recording process chooses no GL backend
    (so it may fork), and a render process that dies is reported by name and replaced."""
    done = _python(
        """
        import os, signal
        from runtime.collection.demo_run import demo_task_path
        from runtime.sim.cameras import CameraRig, FrameRecorder, backend, render_server
        from runtime.sim.environment import TaskEnvironment
        from runtime.sim.recorder import TrajectoryRecorder
        from runtime.taskfile import load_task

        task = load_task(demo_task_path())
        env = TaskEnvironment(task, demo_task_path().parent)
        env.reset(None)
        rig = CameraRig(task.cameras)
        recorder = FrameRecorder(TrajectoryRecorder.for_environment(env), rig, env)
        recorder.begin(env.observation())
        frames = sum(r.frame_count for r in recorder.recordings.values())
        print("frames", frames, "chosen here:", backend._chosen)
        process = render_server.server().process
        first = process.pid
        os.kill(first, signal.SIGKILL)
        process.wait()
        try:
            rig.renderer_for(env).render(env.data, task.cameras[0])
        except render_server.RenderServerDied as error:
            print("died:", error)
        rig.close()
        print("replaced:", render_server.server().process.pid != first)
        env.close()
        """
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "frames 2 chosen here: None", done.stderr[-2000:]
    assert lines[1] == "died: the camera render process exited (exit code -9)"
    assert lines[2] == "replaced: True"


def test_llvmpipe_is_pinned_to_one_thread_for_small_cameras_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Set before the first context of a process (ensure_backend calls it before probing)."""
    from runtime.sim.cameras import backend

    monkeypatch.delenv("LP_NUM_THREADS", raising=False)
    backend._pin_rasterizer_threads(512 * 512)
    assert "LP_NUM_THREADS" not in os.environ
    backend._pin_rasterizer_threads(256 * 256)
    assert os.environ["LP_NUM_THREADS"] == "1"
    monkeypatch.setenv("LP_NUM_THREADS", "2")
    backend._pin_rasterizer_threads(128 * 128)
    assert os.environ["LP_NUM_THREADS"] == "2"  # the user's choice stands
