"""The pipelined ledger: order, bounded lag, errors surfacing with identity, live lease."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from domain.errors import ConcurrencyError
from domain.state import fold
from runtime.collection import collect, run_collection
from runtime.collection.demo_run import prepare_demo_run, write_catalog
from runtime.collection.ledger import LedgerWriter, Tag
from runtime.session import CollectorSession
from store import InMemoryEventStore
from store.records import utcnow


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_catalog(tmp_path_factory.mktemp("catalog") / "demo")


class Watched:
    """Forwards to a store; can slow or fail its appends and records who appended what."""

    def __init__(self, inner: Any, *, delay_s: float = 0.0) -> None:
        self.inner, self.delay_s = inner, delay_s
        self.fail_at: tuple[int, BaseException] | None = None
        self.appends: list[tuple[str, list[str]]] = []
        self.on_append: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(
        self, run_id: str, events: Any, *, expected_version: int, fence: Any = None
    ) -> int:
        self.appends.append((threading.current_thread().name, [e.type for e in events]))
        if self.on_append is not None:
            self.on_append()
        if self.fail_at is not None and len(self.appends) == self.fail_at[0]:
            raise self.fail_at[1]
        time.sleep(self.delay_s)
        return self.inner.append(
            run_id, events, expected_version=expected_version, fence=fence
        )


def prepared(tmp_path: Path, catalog: Path, **kwargs: Any) -> tuple[Watched, str]:
    store = Watched(InMemoryEventStore())
    options = {"batches": 2, "episodes_per_batch": 2, "settle_steps": 10, **kwargs}
    run_id = prepare_demo_run(store.inner, tmp_path / "out", catalog, **options)
    return store, run_id


def test_episodes_are_appended_in_order_on_the_writer_thread(
    tmp_path: Path, catalog: Path
) -> None:
    store, run_id = prepared(tmp_path, catalog)
    store.delay_s = 0.02
    collect(run_id, store=store, progress=False)
    events = store.inner.read(run_id)
    assert fold(run_id, events).state == "completed"
    episodes = [names for _, names in store.appends if "EpisodeStarted" in names]
    assert len(episodes) == 4  # one transaction per episode
    threads = {thread for thread, names in store.appends if "EpisodeStarted" in names}
    assert threads == {f"assetcast-ledger-{run_id}"}
    order = [(e.payload["batch_index"], e.payload["episode_index"])
             for e in events if e.type == "EpisodeStarted"]
    assert order == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [e.type for e in events[-2:]] == ["EnvironmentClosed", "RunCompleted"]


def test_append_error_surfaces_with_its_identity_and_names_its_episode(
    tmp_path: Path, catalog: Path
) -> None:
    store, run_id = prepared(tmp_path, catalog)
    refused = ConcurrencyError("disk said no")
    # Appends: 1 CollectionStarted, 2 episode (0, 0), 3 episode (0, 1) + BatchFinished.
    store.fail_at = (3, refused)
    with pytest.raises(ConcurrencyError, match="disk said no") as caught:
        collect(run_id, store=store, progress=False)
    assert caught.value is refused
    assert any("background ledger writer" in note for note in caught.value.__notes__)
    events = store.inner.read(run_id)
    kinds = [e.type for e in events]
    assert kinds.count("EpisodeStarted") == 1  # (0, 0) made it, (0, 1) was refused
    assert kinds[-2:] == ["EnvironmentClosed", "RunFailed"]
    failed = events[-1].payload
    assert (failed["phase"], failed["batch_index"], failed["episode_index"]) == ("episode", 0, 1)
    assert failed["error_type"] == "ConcurrencyError"
    assert fold(run_id, events).state == "failed"


def test_error_in_the_last_append_surfaces_before_the_environment_is_reported_closed(
    tmp_path: Path, catalog: Path
) -> None:
    store, run_id = prepared(tmp_path, catalog, batches=1, episodes_per_batch=1)
    refused = OSError("fsync failed")
    store.fail_at = (2, refused)  # the only episode, with its BatchFinished
    with pytest.raises(OSError, match="fsync failed") as caught:
        collect(run_id, store=store, progress=False)
    assert caught.value is refused
    events = store.inner.read(run_id)
    assert "RunCompleted" not in [e.type for e in events]
    assert events[-2].type == "EnvironmentClosed" and events[-1].type == "RunFailed"
    assert (events[-1].payload["phase"], events[-1].payload["episode_index"]) == ("episode", 0)


def test_lease_heartbeat_keeps_the_lease_alive_while_the_writer_appends(
    tmp_path: Path, catalog: Path
) -> None:
    store, run_id = prepared(tmp_path, catalog, batches=1, episodes_per_batch=3)
    store.delay_s = 0.25  # every append outlasts a third of the TTL
    expiries: list[bool] = []
    store.on_append = lambda: expiries.append(store.inner.lease_info(run_id).expires_at > utcnow())
    session = CollectorSession.open(store.inner, run_id, ttl_s=0.4, heartbeat_s=0.13)
    started = time.monotonic()
    try:
        run_collection(run_id, store=store, session=session, progress=False)
    finally:
        session.close()
    assert time.monotonic() - started > 1.0  # several TTLs long
    assert session.lost is None
    assert expiries and all(expiries)
    assert fold(run_id, store.inner.read(run_id)).state == "completed"


class Gate:
    """A store stub whose appends wait for a gate, counting what reached it."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered: list[int] = []

    def append(
        self, run_id: str, events: Any, *, expected_version: int, fence: Any = None
    ) -> int:
        self.entered.append(expected_version)
        assert self.open.wait(10)
        return expected_version + len(events)


def test_submissions_block_once_the_queue_is_full() -> None:
    gate = Gate()
    writer = LedgerWriter(gate, "run-x", 10, depth=1)
    tag = Tag("episode", 0, 0)
    writer.submit([("A", {})], tag)  # taken by the writer, waits at the gate
    deadline = time.monotonic() + 5
    while not gate.entered and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.submit([("B", {}), ("C", {})], tag)  # sits in the queue
    third = threading.Thread(target=writer.submit, args=([("D", {})], tag))
    third.start()
    third.join(0.2)
    assert third.is_alive(), "a third job must wait: at most depth + 1 jobs are unlogged"
    gate.open.set()
    third.join(5)
    assert writer.drain() == 14
    assert gate.entered == [10, 11, 13]
    writer.close()


def test_synchronous_depth_zero_appends_in_the_caller() -> None:
    gate = Gate()
    gate.open.set()
    writer = LedgerWriter(gate, "run-x", 0, depth=0)
    writer.submit([("A", {})], Tag("start", None, None))
    assert gate.entered == [0] and writer.drain() == 1


def test_trajectory_committed_is_logged_only_once_its_event_is_durable(
    tmp_path: Path, catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log line is a claim about the ledger: at the moment it is written, the store
    must already hold that episode's TrajectoryCommitted (appends lag behind on purpose)."""
    import runtime.collection.episode_log as collect_module

    store, run_id = prepared(tmp_path, catalog)
    store.delay_s = 0.05  # the writer is always behind the simulator
    claims: list[tuple[int, int, bool]] = []
    real_log = collect_module.log

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real_log, name)

        def info(self, event: str, **fields: Any) -> None:
            if event == "trajectory_committed":
                key = (fields["batch_index"], fields["episode_index"])
                logged = {
                    (e.payload["batch_index"], e.payload["episode_index"])
                    for e in store.inner.read(run_id) if e.type == "TrajectoryCommitted"
                }
                claims.append((*key, key in logged))
            real_log.info(event, **fields)

    monkeypatch.setattr(collect_module, "log", Spy())
    collect(run_id, store=store, progress=False)
    commits = [e for e in store.inner.read(run_id) if e.type == "TrajectoryCommitted"]
    assert len(claims) == len(commits) > 0
    assert all(durable for _b, _e, durable in claims), claims


def test_on_durable_runs_after_the_append_and_never_for_a_failed_one() -> None:
    gate = Gate()
    writer = LedgerWriter(gate, "run-x", 10, depth=1)
    seen: list[list[int]] = []
    writer.submit([("A", {})], Tag("episode", 0, 0), lambda: seen.append(list(gate.entered)))
    time.sleep(0.2)
    assert seen == []  # the append is still waiting at the gate
    gate.open.set()
    writer.drain()
    assert seen == [[10]]
    writer.close()

    class Refusing:
        def append(self, *args: Any, **kwargs: Any) -> int:
            raise ConcurrencyError("stale")

    failing = LedgerWriter(Refusing(), "run-y", 3, depth=0)
    with pytest.raises(ConcurrencyError):
        failing.submit([("A", {})], Tag("episode", 0, 0), lambda: seen.append([-1]))
    assert seen == [[10]]
