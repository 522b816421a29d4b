"""A disk that fills up while an episode's video is written: nothing is committed, the run
fails resumably, and resume finishes it once there is room again.

The disk is real: a tiny tmpfs mounted over the run's ``recordings/`` folder (root only;
skipped elsewhere), so the ``ENOSPC`` comes from the kernel, not from a patched function.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.collection.demo_run import prepare_demo_run, write_catalog
from runtime.verify import verify_events
from store import EventStore


def mount_small_disk(mount_point: Path, request: pytest.FixtureRequest) -> None:
    mount_point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mount_point)],
        capture_output=True, text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    request.addfinalizer(
        lambda: subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
    )


def test_a_full_disk_while_writing_a_video_commits_nothing_and_resumes(
    tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    catalog = write_catalog(tmp_path / "catalog")
    with EventStore(url) as store:
        run_id = prepare_demo_run(
            store, tmp_path / "out", catalog, seed=7, batches=1, episodes_per_batch=2,
            settle_steps=10,
        )
    small_disk = tmp_path / "out" / "recordings"
    mount_small_disk(small_disk, request)
    capsys.readouterr()
    assert main(["--db", url, "--log-level", "error", "collect", run_id, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"assetcast: run {run_id} failed: OSError: [Errno 28] No space left on device" in err
    with EventStore(url) as store:
        events = store.read(run_id)
        assert store.state(run_id).state == "failed"
    assert not [e for e in events if e.type == "TrajectoryCommitted"]
    [failed] = [e.payload for e in events if e.type == "RunFailed"]
    assert (failed["phase"], failed["batch_index"], failed["episode_index"]) == ("episode", 0, 0)
    # Nothing half-written under a final name: the temp file was removed, and the first
    # file of the episode (the front video) never got its name.
    on_disk = [p.name for p in small_disk.rglob("*") if p.is_file()]
    assert not [name for name in on_disk if name.endswith(".tmp")], on_disk
    assert "b0000_e0000.front.rgb.mp4" not in on_disk

    subprocess.run(["umount", "-l", str(small_disk)], check=True)
    assert main(["--db", url, "--log-level", "error", "resume", run_id, "--no-progress"]) == 0
    with EventStore(url) as store:
        events = store.read(run_id)
        assert store.state(run_id).state == "completed"
    commits = [e.payload for e in events if e.type == "TrajectoryCommitted"]
    assert commits and all(len(c["files"]) == 7 for c in commits)
    result = verify_events(run_id, events)
    assert result.ok, result.problems
