"""The process builder of live datasets: a child process builds and publishes what `export`
writes, its publish is fenced by the parent's lease check, its errors keep their class and
message in the parent, and it never outlives its parent or its session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.export.dataset import DatasetSpec, build_version
from runtime.export.episodes import dataset_source, run_source
from runtime.export.live import LiveDatasets
from store.leases import LeaseLost, pid_alive
from tests.runtime.export.conftest import CollectedRun

REPO = Path(__file__).resolve().parents[3]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _leftovers(folder: Path) -> list[str]:
    """Every file or folder under ``folder`` (temporary versions included)."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if not p.is_dir() or any(p.iterdir()))


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


@pytest.fixture(autouse=True)
def _process_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    """These are the child process's tests (the default builder is the thread)."""
    monkeypatch.setenv("ASSETCAST_LIVE_BUILDER", "process")


def test_the_default_builder_is_the_thread_and_a_bad_choice_names_the_variable(
    collected: CollectedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = collected.store()
    specs = [DatasetSpec("lerobot", tmp_path / "live")]
    monkeypatch.delenv("ASSETCAST_LIVE_BUILDER")
    live = LiveDatasets(collected.run_id, specs, store)
    try:
        assert live.builder_kind == "thread"
    finally:
        live.close()
    monkeypatch.setenv("ASSETCAST_LIVE_BUILDER", "fork")
    with pytest.raises(ValueError) as raised:
        LiveDatasets(collected.run_id, specs, store)
    assert str(raised.value) == (
        "ASSETCAST_LIVE_BUILDER must be one of process, thread, not 'fork'"
    )
    assert not (tmp_path / "live").exists()


def test_a_child_process_publishes_what_export_writes_and_is_reaped_at_close(
    collected: CollectedRun, tmp_path: Path
) -> None:
    store = collected.store()
    run_id = collected.run_id
    version = store.state(run_id).version
    specs = [DatasetSpec("lerobot", tmp_path / "live"),
             DatasetSpec("robomimic", tmp_path / "live.hdf5")]
    live = LiveDatasets(run_id, specs, store, min_interval_s=0.0)
    assert live.builder_kind == "process"
    child = live._builder.process  # type: ignore[attr-defined]
    try:
        live.request(version)
        events = live.finish()
    finally:
        live.close()
    assert child.poll() is not None and not pid_alive(child.pid)
    assert [kind for kind, _ in events] == ["DatasetUpdated", "DatasetUpdated"]
    assert [b.version for b in live.builds] == [version]
    assert live.builds[0].wall_s > 0 and live.builds[0].cpu_s > 0

    source = dataset_source([run_source(run_id, store.read(run_id))])
    lerobot = build_version(DatasetSpec("lerobot", tmp_path / "exported"), source)
    robomimic = build_version(DatasetSpec("robomimic", tmp_path / "exported.hdf5"), source)
    assert _files(tmp_path / "live") == _files(tmp_path / "exported")
    assert (tmp_path / "live.hdf5").read_bytes() == (tmp_path / "exported.hdf5").read_bytes()
    (_, lerobot_event), (_, robomimic_event) = events
    assert lerobot_event["digest"] == lerobot.digest and lerobot_event["log_position"] == version
    assert robomimic_event["files"] == {"live.hdf5": robomimic.files["exported.hdf5"]}


def test_a_lease_lost_at_the_fence_publishes_nothing_and_raises_the_parents_error(
    collected: CollectedRun, tmp_path: Path
) -> None:
    import sqlite3

    from store import EventStore

    # A copy of the run's store: the takeover below stays out of the shared fixture's log.
    copy = tmp_path / "copy.db"
    with sqlite3.connect(collected.db_url.removeprefix("sqlite:///")) as source, \
            sqlite3.connect(copy) as target:
        source.backup(target)
    store = EventStore(f"sqlite:///{copy}")
    run_id = collected.run_id
    stalled = store.acquire_lease(run_id, owner="stalled-session", ttl_s=0.3)
    time.sleep(0.5)
    store.acquire_lease(run_id, owner="next-session", ttl_s=30).release()  # a takeover
    seen: list[BaseException] = []

    def check() -> None:
        try:
            stalled.check()
        except BaseException as error:
            seen.append(error)
            raise

    folder = tmp_path / "datasets"
    folder.mkdir()
    specs = [DatasetSpec("lerobot", folder / "live"),
             DatasetSpec("robomimic", folder / "live.hdf5")]
    live = LiveDatasets(run_id, specs, store, before_publish=check, min_interval_s=0.0)
    assert live.builder_kind == "process"
    try:
        live.request(store.state(run_id).version)
        with pytest.raises(LeaseLost) as raised:
            live.finish()
    finally:
        live.close()
    assert len(seen) == 1 and raised.value is seen[0]  # the check's own exception object
    assert live.builds == []
    assert _leftovers(folder) == []  # no version published, no temporary one left


@pytest.mark.parametrize("builder", ["thread", "process"])
def test_an_error_in_a_build_keeps_its_class_and_message(
    collected: CollectedRun, tmp_path: Path, builder: str
) -> None:
    from runtime.export.errors import NotADataset

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("not a dataset")
    store = collected.store()
    live = LiveDatasets(collected.run_id, [DatasetSpec("lerobot", taken)], store,
                        builder=builder, min_interval_s=0.0)
    assert live.builder_kind == builder
    try:
        live.request(store.state(collected.run_id).version)
        with pytest.raises(NotADataset) as raised:
            live.finish()
    finally:
        live.close()
    assert str(raised.value) == f"{taken} exists and is not an assetcast dataset"
    assert (taken / "notes.txt").read_text() == "not a dataset"


def test_an_error_that_does_not_pickle_comes_back_as_a_runtime_error_naming_it() -> None:
    from runtime.export.live_builders.process import transferable

    class Odd(Exception):
        def __init__(self, what: str, code: int) -> None:
            super().__init__(f"{what} ({code})")

    sent = transferable(Odd("the disk is full", 28))
    assert type(sent) is RuntimeError and str(sent) == "Odd: the disk is full (28)"
    assert "In the dataset builder process" in sent.__notes__[0]


_PARENT = """
import sys, time
from pathlib import Path
from runtime.export.dataset import DatasetSpec
from runtime.export.live import LiveDatasets
from runtime.logging import configure_logging
from store import EventStore

configure_logging(level="warning")  # the child logs the same way: nothing on stdout
url, run_id, folder, mode = sys.argv[1:5]
store = EventStore(url)
def fence_that_never_answers():
    print("at the fence", flush=True)
    time.sleep(600)
specs = [DatasetSpec("lerobot", Path(folder) / "live"),
         DatasetSpec("robomimic", Path(folder) / "live.hdf5")]
live = LiveDatasets(run_id, specs, store, before_publish=fence_that_never_answers,
                    min_interval_s=0.0)
print(live._builder.pid, flush=True)
version = store.state(run_id).version
live.request(version if mode == "fence" else version + 1000)
if mode == "log":
    print("waiting for the log", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("mode", ["log", "fence"])
def test_the_child_publishes_nothing_and_exits_when_its_parent_is_sigkilled(
    collected: CollectedRun, tmp_path: Path, mode: str
) -> None:
    folder = tmp_path / "datasets"
    folder.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, collected.db_url, collected.run_id, str(folder), mode],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True,
    )
    try:
        child = int(parent.stdout.readline())
        assert pid_alive(child)
        said = parent.stdout.readline().strip()
        assert said == ("at the fence" if mode == "fence" else "waiting for the log")
        time.sleep(0.5)  # in "log" mode: the child is (or soon is) polling the log
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _gone_within(child, 5.0), f"builder {child} outlived its parent"
    finally:
        parent.kill()
        parent.wait()
    # Nothing published: no link, no file; at most the unfinished temporary version of the
    # build the kill interrupted (as a SIGKILL leaves a build thread's).
    assert not (folder / "live").is_symlink() and not (folder / "live.hdf5").exists()
    assert all(name == ".live.assetcast" or name.startswith(".live.assetcast/tmp-")
               for name in _leftovers(folder))
    if mode == "fence":
        assert _leftovers(folder), "the build had written its temporary version"
    else:
        assert _leftovers(folder) == []


_LOGGING_PARENT = """
import sys
from pathlib import Path
from runtime.export.dataset import DatasetSpec
from runtime.export.live import LiveDatasets
from runtime.logging import configure_logging
from store import EventStore

url, run_id, folder, level = sys.argv[1:5]
configure_logging(level=level, json_lines=True)
store = EventStore(url)
live = LiveDatasets(run_id, [DatasetSpec("robomimic", Path(folder) / "live.hdf5")], store,
                    min_interval_s=0.0)
assert live.builder_kind == "process"
live.request(store.state(run_id).version)
live.finish()
live.close()
"""


@pytest.mark.parametrize("level", ["info", "warning"])
def test_the_child_logs_as_its_parent_is_configured(
    collected: CollectedRun, tmp_path: Path, level: str
) -> None:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _LOGGING_PARENT, collected.db_url, collected.run_id,
         str(tmp_path), level],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    published = [json.loads(line) for line in done.stderr.splitlines()
                 if '"dataset_published"' in line]
    if level == "info":
        assert [(e["level"], e["format"]) for e in published] == [("info", "robomimic")]
    else:
        assert published == []
