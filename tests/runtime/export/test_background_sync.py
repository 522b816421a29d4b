"""Background fsyncs of a new version: they reach files whose folder was renamed meanwhile,
and never hold more than a bounded number of files open."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from runtime.export import publish
from runtime.export.publish import BackgroundSync


def test_syncs_reach_files_after_their_folder_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    synced: list[int] = []
    release = threading.Event()

    def held_fsync(fd: int) -> None:
        release.wait(5)  # every sync is still in flight when the folder is renamed
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", held_fsync)
    root = tmp_path / "tmp-version"
    (root / "data").mkdir(parents=True)
    background = BackgroundSync(root)
    inodes = set()
    files = publish._SYNC_THREADS + 8  # some syncs only start after the rename
    for number in range(files):
        path = root / "data" / f"file-{number}.parquet"
        path.write_bytes(b"x" * number)
        inodes.add(path.stat().st_ino)
        background.written(path)
    os.rename(root, tmp_path / "final")
    release.set()
    names = background.wait()
    assert names == {f"data/file-{n}.parquet" for n in range(files)}
    assert set(synced) == inodes


def test_open_files_awaiting_a_sync_stay_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    most = [0]
    lock = threading.Lock()

    def slow_fsync(fd: int) -> None:
        time.sleep(0.01)
        with lock:
            most[0] = max(most[0], len(os.listdir("/proc/self/fd")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    before = len(os.listdir("/proc/self/fd"))
    background = BackgroundSync(tmp_path)
    files = 3 * publish._MAX_OPEN_SYNCS
    for number in range(files):
        path = tmp_path / f"f{number}"
        path.write_bytes(b"data")
        background.written(path)
    assert len(background.wait()) == files
    assert most[0] <= before + publish._MAX_OPEN_SYNCS + 4  # + listdir's own fd and slack
