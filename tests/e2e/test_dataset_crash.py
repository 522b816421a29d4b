"""Live datasets under SIGKILL: the dataset on disk is always a whole version of the log.

One run of the demo task collects with a live LeRobot dataset and a live robomimic file. The
collector is killed with SIGKILL at random moments (each a random delay after its imports were
done, so kills land in episodes, commits and dataset writes) and resumed each time. At every
kill point the LeRobot link must name a complete version (its files hash to its name) and both
datasets must hold only episodes the log committed, with the log's trajectory digests. At the
end both live datasets must be byte-identical to `export` of the finished log, and their
content (frames, stats, tasks, info) byte-identical to the export of an uninterrupted run.
Sessions alternate between the two builders: a background thread of the collector (the
default) and a child process (``ASSETCAST_LIVE_BUILDER=process``). No child may outlive its
killed collector by more than a few seconds, and none may publish once its collector is dead
(tests/runtime/export/test_live_process.py kills one at its fence).

Run as a script this file is the child: ``python test_dataset_crash.py DB RUN MODE LEROBOT HDF5``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BATCHES, EPISODES, SEED, SETTLE = 3, 2, 7, 10
MIN_KILLS, MAX_SESSIONS = 10, 60


def _child(db_url: str, run_id: str, mode: str, lerobot: str, hdf5: str) -> None:
    from runtime.logging import configure_logging

    configure_logging(level="warning")
    import h5py  # noqa: F401  (heavy imports first: "ready" means the work starts now)
    import pyarrow.parquet  # noqa: F401

    import runtime.sim  # noqa: F401
    from runtime.collection import collect
    from runtime.export.dataset import DatasetSpec
    from runtime.resume import resume
    from store import EventStore

    store = EventStore(db_url)
    datasets = [DatasetSpec.parse(f"lerobot:{lerobot}"), DatasetSpec.parse(f"robomimic:{hdf5}")]
    print("ready", flush=True)
    action = collect if mode == "collect" else resume
    action(run_id, store=store, progress=False, datasets=datasets)
    print("done", flush=True)


def _spawn(
    db_url: str, run_id: str, mode: str, lerobot: Path, hdf5: Path, builder: str
) -> Any:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ASSETCAST_LIVE_BUILDER": builder}
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), db_url, run_id, mode, str(lerobot),
         str(hdf5)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _builders_of(pid: int) -> list[int]:
    """Live dataset builder processes started by the collector ``pid`` (their argv names it,
    so they are found even after a kill reparented them)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = [a for a in Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if len(argv) >= 2 and argv[-1] == str(pid).encode() and any(
            a.endswith(b"process_main.py") for a in argv
        ):
            found.append(int(entry))
    return found


def _published(lerobot: Path, hdf5: Path) -> tuple[Any, Any]:
    """Which versions are published: the LeRobot link's target, the robomimic file's
    identity."""
    link = os.readlink(lerobot) if lerobot.is_symlink() else None
    try:
        status = os.stat(hdf5)
    except FileNotFoundError:
        return link, None
    return link, (status.st_ino, status.st_size, status.st_mtime_ns)


def _all_gone(pids: list[int], seconds: float) -> list[int]:
    """The pids of ``pids`` still running after ``seconds``."""
    from store.leases import pid_alive

    deadline = time.monotonic() + seconds
    while (alive := [p for p in pids if pid_alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _committed(store: Any, run_id: str) -> dict[tuple[int, int], str]:
    return {
        (e.payload["batch_index"], e.payload["episode_index"]): e.payload["sha256"]
        for e in store.read(run_id)
        if e.type == "TrajectoryCommitted"
    }


def _check_consistent(store: Any, run_id: str, lerobot: Path, hdf5: Path, where: str) -> int:
    """The on-disk datasets are whole versions holding only committed episodes; returns how
    many episodes the LeRobot one holds."""
    import h5py

    from runtime.export.dataset import DatasetSpec, current_files, dataset_digest, read_manifest

    committed = _committed(store, run_id)
    held = 0
    for spec in (DatasetSpec("lerobot", lerobot), DatasetSpec("robomimic", hdf5)):
        manifest = read_manifest(spec)
        if manifest is None:
            continue
        for episode in manifest["episodes"]:
            key = (episode["batch_index"], episode["episode_index"])
            assert committed.get(key) == episode["trajectory_sha256"], (
                f"{where}: {spec.format} holds episode {key} the log does not commit"
            )
        if spec.format == "lerobot":
            version = Path(os.path.realpath(lerobot))
            digest = dataset_digest(current_files(spec))
            assert version.name == digest[:32], f"{where}: a torn LeRobot version {version}"
            info = json.loads((version / "meta" / "info.json").read_text())
            assert info["total_episodes"] == len(manifest["episodes"]), where
            held = len(manifest["episodes"])
        else:
            with h5py.File(hdf5, "r") as handle:
                assert len(handle["data"]) == len(manifest["episodes"]), where
    return held


def _state_only_task(directory: Path) -> Path:
    """The gantry demo task without its cameras: rendering would make each episode seconds
    long, and this test is about when the dataset is switched, not about pixels (camera
    exports are covered by tests/runtime/export/test_camera_export.py)."""
    import yaml

    from runtime.collection.demo_run import gantry_demo_task_text

    task = yaml.safe_load(gantry_demo_task_text())
    task.pop("cameras", None)
    path = directory / "task.state_only.yaml"
    path.write_text(yaml.safe_dump(task, sort_keys=False), encoding="utf-8")
    return path


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.timeout(400)
def test_sigkilled_live_datasets_stay_whole_and_end_equal_to_export(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from runtime.collection import collect
    from runtime.collection.demo_run import write_catalog
    from runtime.export import DatasetSpec, export_runs
    from store import EventStore

    seed = int(os.environ.get("ASSETCAST_CRASH_SEED", random.SystemRandom().randrange(2**32)))
    rng = random.Random(seed)
    db_url = f"sqlite:///{tmp_path / 'crash.db'}"
    store = EventStore(db_url)
    catalog = write_catalog(tmp_path / "catalog")

    task_file = _state_only_task(tmp_path)

    def new_run(name: str) -> str:
        from domain.config import CollectionConfig
        from runtime.prepare import prepare, providers_from_catalog_args

        cfg = CollectionConfig(seed=SEED, max_batches=BATCHES, episodes_per_batch=EPISODES,
                               settle_steps=SETTLE)
        providers = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
        return prepare(task_file, providers, cfg=cfg, output_dir=tmp_path / name,
                       store=store).run_id

    run_id = new_run("crashed")
    lerobot, hdf5 = tmp_path / "live", tmp_path / "live.hdf5"
    kills, sessions, max_held, mode = 0, 0, 0, "collect"
    builders_at_kills = 0  # kills that found a builder process running
    high = 7.0  # kill moments are drawn from [0.5 s, high] after the child is ready
    while True:
        assert sessions < MAX_SESSIONS, f"no end after {sessions} sessions (seed {seed})"
        sessions += 1
        builder = ("process", "thread")[sessions % 2]
        proc = _spawn(db_url, run_id, mode, lerobot, hdf5, builder)
        mode = "resume"
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-3000:]
        if kills < MIN_KILLS:
            started = time.monotonic()
            try:
                proc.wait(timeout=rng.uniform(0.5, high))
            except subprocess.TimeoutExpired:
                found = _builders_of(proc.pid)
                assert builder == "process" or not found, f"{builder} builder started a child"
                builders_at_kills += bool(found)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                at_kill = _published(lerobot, hdf5)
                orphans = _all_gone(_builders_of(proc.pid), 5.0)
                assert not orphans, f"builder {orphans} outlived its killed collector"
                time.sleep(0.2)
                assert _published(lerobot, hdf5) == at_kill, "published after the kill"
            else:  # the session outran its kill: aim the next kills inside what it took
                high = max(0.6, 0.9 * (time.monotonic() - started))
        out, err = proc.communicate(timeout=300)
        where = f"seed {seed}, session {sessions}"
        if proc.returncode == -signal.SIGKILL:
            kills += 1
            max_held = max(max_held, _check_consistent(store, run_id, lerobot, hdf5, where))
        else:
            assert proc.returncode == 0, f"{where}: exited {proc.returncode}\n{err[-4000:]}"
        if store.state(run_id).state != "completed":
            continue
        if kills >= MIN_KILLS:
            break
        # This run finished before enough kills: go on killing a fresh run of the same task.
        run_id, mode = new_run(f"crashed_{sessions}"), "collect"
        lerobot, hdf5 = tmp_path / f"live_{sessions}", tmp_path / f"live_{sessions}.hdf5"
    assert kills >= MIN_KILLS
    assert max_held > 0, f"no kill found a non-empty dataset (seed {seed})"
    assert builders_at_kills > 0, f"no kill found a builder process (seed {seed})"
    _check_consistent(store, run_id, lerobot, hdf5, "final")

    # The final live datasets are exactly what `export` writes from the finished log.
    exported = tmp_path / "exported"
    version = export_runs(store, [run_id], DatasetSpec("lerobot", exported))
    assert _files(lerobot) == _files(exported)
    assert version.total_episodes == len(_committed(store, run_id))
    export_runs(store, [run_id], DatasetSpec("robomimic", tmp_path / "exported.hdf5"))
    assert hdf5.read_bytes() == (tmp_path / "exported.hdf5").read_bytes()

    # An uninterrupted run of the same task and seed: the same content; only provenance (run id,
    # commit positions, and the trajectory digests, since a trajectory names its run) differs,
    # and only in the per-episode metadata.
    clean = new_run("uninterrupted")
    collect(clean, store=store, progress=False)
    reference = tmp_path / "reference"
    export_runs(store, [clean], DatasetSpec("lerobot", reference))
    ours, theirs = _files(lerobot), _files(reference)
    episodes_file = "meta/episodes/chunk-000/file-000.parquet"
    varying = {episodes_file, "meta/assetcast.json"}
    assert {k: v for k, v in ours.items() if k not in varying} == {
        k: v for k, v in theirs.items() if k not in varying
    }
    drop = ["assetcast/run_id", "assetcast/commit_seq", "assetcast/trajectory_sha256"]
    assert pq.read_table(lerobot / episodes_file).drop(drop).equals(
        pq.read_table(reference / episodes_file).drop(drop)
    )
    print(f"dataset crash test: seed {seed}, {kills} kills in {sessions} sessions "
          f"({builders_at_kills} with a builder process), largest dataset seen at a kill: "
          f"{max_held} episodes")


if __name__ == "__main__":
    _child(*sys.argv[1:6])
