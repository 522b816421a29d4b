"""Camera benchmarks, measured side by side in one run on one machine state.

1. Rendering throughput inside episodes vs raw ``mujoco.Renderer``: the demo task's two
   128x128 cameras (rgb + depth + segmentation each) are timed inside real episodes (the
   render process's time per sample: kinematics, every pass, H.264 encoding of the frame),
   then the same model, quality settings and camera poses are rendered by a bare
   ``mujoco.Renderer`` loop (update_scene, then one render per modality). Figure:
   camera-frames/s of each and their ratio (goal >= 0.8).
2. Episodes per minute of the demo collection (the shipped task: Franka arm) with its 2
   cameras vs the same task with the cameras removed (same assets, seeds and episodes),
   alternating, median of repeats (goal >= 0.5); also each run's ratio, the CPU seconds of
   both processes (the ratio a machine with no spare core would see: frames render in a
   separate process, in parallel with the physics when a core is free) and the load.
3. Bytes per episode-second per camera and modality (committed files / (frames / fps)).
4. Frustum culling: the in-episode frames re-rendered by ``CameraRenderer`` with culling on
   and off, alternating, in one process; frames must be byte-identical; figure: speed-up.
5. Where a camera-frame's time goes (scene update + culling, colour+depth pass, segmentation
   pass, depth conversion) and an episode's encoding time per modality, re-rendering the
   in-episode samples in this thread.
6. Decimated vs original Panda visual meshes (``runtime/sim/robots/panda_visual``): the same
   scene and poses rendered with both sets at 128 and 256 px, alternating: ms per
   camera-frame of each, and how much the images differ (mean |RGB difference|, share of
   pixels differing by more than 16 of 255, segmentation labels and depth > 5 mm changed).
   Writes ``bench-output/cameras/decimation_<px>.png``: original | decimated | per-pixel
   difference (heat map with its scale) for both cameras.

Run: ``.venv/bin/python bench/bench_cameras.py [--figures DIR]`` (prints figures; not part of
pytest).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from domain.config import CollectionConfig  # noqa: E402
from domain.task import task_to_dict  # noqa: E402
from runtime.collection import collect  # noqa: E402
from runtime.collection.demo_run import demo_task_path, write_catalog  # noqa: E402
from runtime.logging import configure_logging  # noqa: E402
from runtime.prepare import prepare, providers_from_catalog_args  # noqa: E402
from runtime.sim.cameras import encoding, render_server, rendering  # noqa: E402
from runtime.sim.cameras import recorder as recorder_module  # noqa: E402
from runtime.sim.cameras.backend import ensure_backend  # noqa: E402
from runtime.sim.cameras.rig import environment_labels, mount_bodies  # noqa: E402
from runtime.sim.environment import TaskEnvironment  # noqa: E402
from runtime.sim.robots.franka_panda import FrankaPanda  # noqa: E402
from runtime.taskfile import load_task  # noqa: E402
from store import InMemoryEventStore  # noqa: E402

BATCHES, EPISODES, SETTLE, SEED = 1, 3, 20, 7
REPEATS = 3
FIGURES = REPO / "bench-output" / "cameras"
COMPARE_SAMPLES = 40
VISIBLE_DIFFERENCE = 16  # of 255, max over channels


class RenderTimer:
    """Adds up what the render process reports for each committed episode (its time spent
    rendering and the frames), and keeps samples ``(renderer, qpos, camera)`` for the
    in-process loops below."""

    def __init__(self) -> None:
        self.seconds, self.frames = 0.0, 0
        self.original = recorder_module.FrameRecorder._collect
        self.samples: list[tuple[Any, Any, Any]] = []

    def __enter__(self) -> RenderTimer:
        timer = self

        def timed(recorder: Any) -> Any:
            recordings = timer.original(recorder)
            timer.seconds += recorder.render_seconds
            timer.frames += sum(r.frame_count for r in recordings.values())
            for qpos, due in zip(recorder._positions, recorder._due, strict=True):
                for camera in due:
                    if len(timer.samples) < 400:
                        timer.samples.append((recorder.renderer, qpos, camera))
            return recordings

        recorder_module.FrameRecorder._collect = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        recorder_module.FrameRecorder._collect = self.original  # type: ignore[method-assign]


def local_renderer(source: Any) -> rendering.CameraRenderer:
    """A ``CameraRenderer`` in this process for the model and cameras of ``source``."""
    return rendering.CameraRenderer(
        source.model, source.cameras, source.labels, source.mount_bodies
    )


def task_without_cameras(directory: Path) -> Path:
    task = task_to_dict(load_task(demo_task_path()))
    task.pop("cameras", None)
    path = directory / "task_no_cameras.yaml"
    path.write_text(yaml.safe_dump(task, sort_keys=False), encoding="utf-8")
    return path


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of the render process (from /proc)."""
    total = time.process_time()
    if render_server._server is not None and render_server._server.alive():
        fields = Path(f"/proc/{render_server._server.process.pid}/stat").read_text().split()
        total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return total


def collect_once(
    task: Path, catalog: Path, out: Path
) -> tuple[float, Any, str, Path, float]:
    """Wall seconds of one collection, its store, run id, output folder and CPU seconds."""
    store = InMemoryEventStore()
    cfg = CollectionConfig(
        seed=SEED, max_batches=BATCHES, episodes_per_batch=EPISODES, settle_steps=SETTLE
    )
    providers = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
    run_id = prepare(task, providers, cfg=cfg, output_dir=out, store=store, goal="run").run_id
    cpu, start = cpu_seconds(), time.perf_counter()
    collect(run_id, store=store, progress=False)
    return time.perf_counter() - start, store, run_id, out, cpu_seconds() - cpu


def raw_renderer_fps(samples: list[tuple[Any, Any, Any]]) -> float:
    """The same model, settings and camera poses through a bare ``mujoco.Renderer``."""
    camera_renderer, _, _ = samples[0]
    model = camera_renderer.model
    ensure_backend(max_pixels=128 * 128)  # the runtime's choice (MUJOCO_GL may be unset)
    data = mujoco.MjData(model)
    renderer = mujoco.Renderer(model, height=128, width=128)
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION,
                 mujoco.mjtRndFlag.mjRND_SKYBOX):
        renderer.scene.flags[flag] = 0
    cameras = []
    for _, qpos, camera in samples:
        data.qpos[:] = qpos
        mujoco.mj_forward(model, data)
        position, rotation = camera_renderer.pose(camera, data)
        free = mujoco.MjvCamera()
        free.type = mujoco.mjtCamera.mjCAMERA_FREE
        free.lookat[:] = position - rotation[:, 2]
        free.distance = 1.0
        forward = -rotation[:, 2]
        free.azimuth = float(np.degrees(np.arctan2(forward[1], forward[0])))
        free.elevation = float(np.degrees(np.arcsin(np.clip(forward[2], -1, 1))))
        cameras.append((qpos, free, camera.modalities))
    start = time.perf_counter()
    for qpos, free, modalities in cameras:
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        renderer.update_scene(data, camera=free)
        if "rgb" in modalities:
            renderer.render()
        if "depth" in modalities:
            renderer.enable_depth_rendering()
            renderer.render()
            renderer.disable_depth_rendering()
        if "segmentation" in modalities:
            renderer.enable_segmentation_rendering()
            renderer.render()
            renderer.disable_segmentation_rendering()
    seconds = time.perf_counter() - start
    renderer.close()
    return len(cameras) / seconds


def culling_speedup(samples: list[tuple[Any, Any, Any]], rounds: int = 3) -> tuple[float, int]:
    """Median speed-up of culled over unculled rendering of ``samples``; and how many images
    differ between the two (must be 0)."""
    source = samples[0][0]
    model = source.model
    data = mujoco.MjData(model)
    renderer = local_renderer(source)

    def render_all(cull: bool) -> tuple[float, list[Any]]:
        renderer.culling = cull
        frames, start = [], time.perf_counter()
        for _, qpos, camera in samples:
            data.qpos[:] = qpos
            mujoco.mj_kinematics(model, data)
            frames.append(renderer.render(data, camera))
        return time.perf_counter() - start, frames

    ratios, differing = [], 0
    try:
        for _ in range(rounds):
            full_seconds, full = render_all(False)
            culled_seconds, culled = render_all(True)
            ratios.append(full_seconds / culled_seconds)
            differing += sum(
                not np.array_equal(a.images[m], b.images[m])
                for a, b in zip(full, culled, strict=True)
                for m in a.images
            )
    finally:
        renderer.close()
    return statistics.median(ratios), differing


class Stopwatch:
    """Adds up the time of named functions while active (wraps attributes of objects)."""

    def __init__(self, targets: list[tuple[Any, str, str]]) -> None:
        self.targets = targets
        self.seconds: dict[str, float] = defaultdict(float)
        self.saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Stopwatch:
        for owner, attribute, label in self.targets:
            original = getattr(owner, attribute)
            self.saved.append((owner, attribute, original))

            def timed(*args: Any, _original: Any = original, _label: str = label,
                      **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.seconds[_label] += time.perf_counter() - start

            setattr(owner, attribute, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attribute, original in reversed(self.saved):
            setattr(owner, attribute, original)


def time_breakdown(samples: list[tuple[Any, Any, Any]]) -> None:
    source = samples[0][0]
    model = source.model
    data = mujoco.MjData(model)
    renderer = local_renderer(source)
    frames: dict[str, list[Any]] = defaultdict(list)
    watch = Stopwatch([
        (rendering.CameraRenderer, "_place", "scene update + culling"),
        (rendering._Renderer, "render_rgb_depth", "colour + depth pass, readback"),
        (rendering._Renderer, "render_segmentation", "segmentation pass, readback, labels"),
        (rendering, "depth_to_mm", "depth to millimetres"),
    ])
    try:
        start = time.perf_counter()
        with watch:
            for _, qpos, camera in samples:
                data.qpos[:] = qpos
                mujoco.mj_kinematics(model, data)
                frames[camera.name].append(renderer.render(data, camera))
        total = time.perf_counter() - start
    finally:
        renderer.close()
    count = len(samples)
    print(f"5. where the time goes ({count} camera-frames re-rendered, "
          f"{1000 * total / count:.2f} ms each)")
    for label, seconds in watch.seconds.items():
        print(f"   {label:38s} {1000 * seconds / count:6.3f} ms/frame")
    other = total - sum(watch.seconds.values())
    print(f"   {'other (kinematics, pose, Python)':38s} {1000 * other / count:6.3f} ms/frame")
    for name, camera_frames in frames.items():
        fps = next(c.fps for c in source.cameras if c.name == name)
        for modality in camera_frames[0].images:
            stack = np.stack([f.images[modality] for f in camera_frames])
            start = time.perf_counter()
            if modality == "rgb":
                encoding.encode_rgb_mp4(stack, fps)
            elif modality == "depth":
                encoding.encode_depth_npz(stack, fps, 5)
            else:
                encoding.encode_segmentation_npz(stack, source.labels.names, fps, 5)
            seconds = time.perf_counter() - start
            print(f"   encode {name:6s} {modality:13s} {1000 * seconds / len(stack):6.3f} "
                  f"ms/frame")


def _render_set(
    visual_set: str, deployment: Path, cameras: tuple[Any, ...]
) -> tuple[TaskEnvironment, rendering.CameraRenderer]:
    previous = FrankaPanda.visual_set
    FrankaPanda.visual_set = visual_set
    try:
        env = TaskEnvironment.from_deployment(deployment)
    finally:
        FrankaPanda.visual_set = previous
    renderer = rendering.CameraRenderer(
        env.model, cameras, environment_labels(env), mount_bodies(cameras, env.model)
    )
    return env, renderer


def decimation_comparison(
    deployment: Path, samples: list[tuple[Any, Any, Any]], figures: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    task_cameras = samples[0][0].cameras
    per_camera = COMPARE_SAMPLES // len(task_cameras)
    picked = []
    for camera in task_cameras:
        own = [s for s in samples if s[2].name == camera.name]
        picked.extend(own[:: max(1, len(own) // per_camera)][:per_camera])
    robot_label = samples[0][0].labels.names.index("robot")
    print("6. decimated vs original Panda visual meshes (same scene, poses, settings)")
    figures.mkdir(parents=True, exist_ok=True)
    for size in (128, 256):
        cameras = tuple(dataclasses.replace(c, width=size, height=size) for c in task_cameras)
        by_name = {c.name: c for c in cameras}
        sets = {name: _render_set(name, deployment, cameras) for name in ("original", "decimated")}
        seconds: dict[str, float] = defaultdict(float)
        images: dict[str, list[Any]] = defaultdict(list)
        try:
            triangles = {name: env.model.nmeshface for name, (env, _) in sets.items()}
            for _, qpos, camera in picked:
                for name, (env, renderer) in sets.items():  # alternating, same pose
                    data = mujoco.MjData(env.model)
                    data.qpos[:] = qpos
                    mujoco.mj_kinematics(env.model, data)
                    mujoco.mj_comPos(env.model, data)
                    start = time.perf_counter()
                    frame = renderer.render(data, by_name[camera.name])
                    seconds[name] += time.perf_counter() - start
                    images[name].append((camera.name, frame.images))
        finally:
            for env, renderer in sets.values():
                renderer.close()
                env.close()
        rgb_diff, visible, labels, depth = [], [], [], []
        for (_, a), (_, b) in zip(images["original"], images["decimated"], strict=True):
            difference = np.abs(a["rgb"].astype(np.int16) - b["rgb"].astype(np.int16))
            rgb_diff.append(difference.mean())
            visible.append((difference.max(axis=2) > VISIBLE_DIFFERENCE).mean())
            labels.append((a["segmentation"] != b["segmentation"]).mean())
            depth.append((np.abs(a["depth"].astype(np.int32) - b["depth"]) > 5).mean())
        count = len(picked)
        print(f"   {size}x{size}: original {triangles['original']} triangles "
              f"{1000 * seconds['original'] / count:6.2f} ms/camera-frame; decimated "
              f"{triangles['decimated']} triangles {1000 * seconds['decimated'] / count:6.2f} "
              f"ms/camera-frame; speed-up {seconds['original'] / seconds['decimated']:.2f}x")
        print(f"      mean |RGB diff| {statistics.mean(rgb_diff):.2f}/255; pixels > "
              f"{VISIBLE_DIFFERENCE}/255: {100 * statistics.mean(visible):.2f}% (worst frame "
              f"{100 * max(visible):.2f}%); segmentation labels changed "
              f"{100 * statistics.mean(labels):.2f}%; depth > 5 mm "
              f"{100 * statistics.mean(depth):.2f}%")
        shown: dict[str, int] = {}  # per camera, the frame showing the most of the arm
        for index, (camera_name, frame_images) in enumerate(images["original"]):
            arm = int((frame_images["segmentation"] == robot_label).sum())
            best = shown.get(camera_name)
            if best is None or arm > int(
                (images["original"][best][1]["segmentation"] == robot_label).sum()
            ):
                shown[camera_name] = index
        figure, axes = pyplot.subplots(len(shown), 3, figsize=(10.5, 3.4 * len(shown)))
        axes = np.atleast_2d(axes)
        for row, (camera_name, index) in enumerate(sorted(shown.items())):
            original = images["original"][index][1]["rgb"]
            decimated = images["decimated"][index][1]["rgb"]
            difference = np.abs(original.astype(np.int16) - decimated).max(axis=2)
            axes[row, 0].imshow(original)
            axes[row, 0].set_title(f"{camera_name}: original ({triangles['original']} tri)")
            axes[row, 1].imshow(decimated)
            axes[row, 1].set_title(f"decimated ({triangles['decimated']} tri)")
            heat = axes[row, 2].imshow(difference, cmap="magma", vmin=0, vmax=64)
            axes[row, 2].set_title("|difference| (max channel)")
            figure.colorbar(heat, ax=axes[row, 2], fraction=0.046, label="of 255")
            for axis in axes[row]:
                axis.set_axis_off()
        figure.tight_layout()
        path = figures / f"decimation_{size}.png"
        figure.savefig(path, dpi=100)
        pyplot.close(figure)
        print(f"      figure: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description="camera benchmarks")
    parser.add_argument("--figures", type=Path, default=FIGURES, help="where PNGs go")
    args = parser.parse_args()
    configure_logging(level="warning")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        catalog = write_catalog(root / "catalog")
        plain_task = task_without_cameras(root)
        with_cameras: list[float] = []
        without: list[float] = []
        cpu_with: list[float] = []
        cpu_without: list[float] = []
        timer = RenderTimer()
        last: tuple[Any, str, Path] | None = None
        start = time.perf_counter()
        # Once per collecting process, measured apart (the demo's cameras are 128x128).
        render_server.check_backend(max_pixels=128 * 128)
        server_start = time.perf_counter() - start
        for repeat in range(REPEATS):
            with timer:
                seconds, store, run_id, out, cpu = collect_once(
                    demo_task_path(), catalog, root / f"cams_{repeat}"
                )
            with_cameras.append(seconds)
            cpu_with.append(cpu)
            last = (store, run_id, out)
            seconds, *_, cpu = collect_once(plain_task, catalog, root / f"plain_{repeat}")
            without.append(seconds)
            cpu_without.append(cpu)
        episodes = BATCHES * EPISODES
        in_episode_fps = timer.frames / timer.seconds
        raw_fps = raw_renderer_fps(timer.samples)
        print("1. rendering throughput (2 cameras, 128x128, rgb+depth+segmentation per frame)")
        print(f"   inside episodes: {in_episode_fps:8.1f} camera-frames/s "
              f"({timer.frames} frames in {timer.seconds:.2f} s)")
        print(f"   raw Renderer:    {raw_fps:8.1f} camera-frames/s "
              f"({len(timer.samples)} frames, same model/settings/poses)")
        print(f"   ratio inside/raw: {in_episode_fps / raw_fps:.2f}  (goal >= 0.8)")
        cams_rate = 60 * episodes / statistics.median(with_cameras)
        plain_rate = 60 * episodes / statistics.median(without)
        print("2. collection speed (demo task, median of "
              f"{REPEATS} x {episodes} episodes, alternating)")
        print(f"   2 cameras: {cams_rate:6.1f} episodes/min; no cameras: {plain_rate:6.1f} "
              f"episodes/min; ratio {cams_rate / plain_rate:.2f}  (goal >= 0.5)")
        print("   per-run ratios (wall): " + ", ".join(
            f"{b / a:.2f}" for a, b in zip(with_cameras, without, strict=True)))
        cpu_ratio = statistics.median(cpu_without) / statistics.median(cpu_with)
        print(f"   CPU seconds per run (both processes): 2 cameras "
              f"{statistics.median(cpu_with):.2f}, no cameras {statistics.median(cpu_without):.2f}"
              f"; ratio {cpu_ratio:.2f} (the wall ratio on a machine with no core to spare)")
        print(f"   render process start (once per collecting process, not in the runs above): "
              f"{server_start:.2f} s; load average now {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")
        assert last is not None
        store, run_id, out = last
        print("3. bytes per episode-second per camera and modality")
        per_key: dict[tuple[str, str], list[float]] = defaultdict(list)
        for event in store.read(run_id):
            if event.type != "TrajectoryCommitted":
                continue
            files = event.payload["files"]
            meta_entry = next(f for f in files if f["modality"] == "metadata")
            metadata = json.loads((out / meta_entry["path"]).read_text())
            for entry in files:
                if entry["camera"] is None:
                    continue
                camera = metadata["cameras"][entry["camera"]]
                duration = camera["frame_count"] / camera["fps"]
                per_key[(entry["camera"], entry["modality"])].append(entry["bytes"] / duration)
        for (camera, modality), values in sorted(per_key.items()):
            print(f"   {camera:6s} {modality:13s} {statistics.mean(values) / 1024:8.1f} KiB/s")
        total = sum(statistics.mean(v) for v in per_key.values()) / 1024
        print(f"   all cameras   {total:8.1f} KiB per episode-second")
        speedup, differing = culling_speedup(timer.samples)
        print("4. frustum culling (same frames, culling off vs on, alternating, median of 3)")
        print(f"   speed-up {speedup:.2f}x; differing images: {differing}  (must be 0)")
        time_breakdown(timer.samples)
        decimation_comparison(out / "batch_0000", timer.samples, args.figures)


if __name__ == "__main__":
    main()
