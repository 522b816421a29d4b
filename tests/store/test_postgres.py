"""PostgreSQL-only behaviour: real write races, isolation levels, time zones, a run's fold.

The shared contract (append, legality, atomicity, immutability, read validation,
leases, migrations) runs on PostgreSQL through the ``backend_url``/``store`` fixtures
of the other store tests; this file covers what only a server with concurrent
sessions can show: a writer that blocks on another's uncommitted append.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from domain.errors import ConcurrencyError, LeaseHeld
from domain.state import fold
from store import EventStore, InMemoryEventStore
from tests.store.eventgen import (
    batch_started,
    collection_started,
    created,
    episode,
    legal_run,
    preparation,
)

ISOLATION = [None, "REPEATABLE READ", "SERIALIZABLE"]


def _collecting(store: EventStore, run_id: str = "r") -> int:
    return store.append(
        run_id, [created(run_id), *preparation(1), collection_started(), batch_started(0)],
        expected_version=0,
    )


def _open(url: str, isolation: str | None) -> EventStore:
    if isolation is None:
        return EventStore(url)  # the default: READ COMMITTED
    return EventStore(engine=sa.create_engine(url, isolation_level=isolation))


def _wait_for_lock_waiter(url: str, timeout_s: float = 10.0) -> None:
    """Block until some session of this database waits on a lock."""
    engine = sa.create_engine(url)
    deadline = time.monotonic() + timeout_s
    try:
        with engine.connect() as conn:
            while time.monotonic() < deadline:
                waiting = conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                ).scalar_one()
                conn.rollback()
                if waiting:
                    return
                time.sleep(0.02)
    finally:
        engine.dispose()
    raise AssertionError("the second writer never blocked on the first one's transaction")


def _race(url: str, first: EventStore, first_call: Callable[[], object],
          second_call: Callable[[], object]) -> object:
    """Run ``first_call``; just before its COMMIT, start ``second_call`` on a thread and
    wait until it blocks on the first transaction's locks. Return what the second
    call returned or raised."""
    outcome: dict[str, object] = {}

    def second() -> None:
        try:
            outcome["value"] = second_call()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome["value"] = exc

    thread = threading.Thread(target=second)

    def before_commit(_conn) -> None:  # type: ignore[no-untyped-def]
        if thread.ident is None:
            thread.start()
            _wait_for_lock_waiter(url)

    event.listen(first.engine, "commit", before_commit)
    try:
        first_call()
    finally:
        event.remove(first.engine, "commit", before_commit)
    thread.join(20)
    assert not thread.is_alive()
    return outcome["value"]


@pytest.mark.parametrize("isolation", ISOLATION)
def test_writer_waiting_on_a_concurrent_append_gets_concurrency_error(
    pg_url: str, isolation: str | None
) -> None:
    a, b = EventStore(pg_url), _open(pg_url, isolation)
    version = _collecting(a)
    assert b.state("r").version == version  # b's cache is current: it goes straight to the CAS
    started = episode(0, 0)[:1]
    result = _race(
        pg_url, a,
        lambda: a.append("r", started, expected_version=version),
        lambda: b.append("r", started, expected_version=version),
    )
    assert isinstance(result, ConcurrencyError), result
    assert f"expected version {version} is stale" in str(result)
    assert [e.seq for e in b.read("r")] == list(range(1, version + 2))
    # the loser recovers by refreshing, like any optimistic writer
    assert b.append("r", episode(0, 0)[1:2], expected_version=version + 1) == version + 2
    a.close()
    b.close()


@pytest.mark.parametrize("isolation", ISOLATION)
def test_two_sessions_creating_the_same_run_one_gets_concurrency_error(
    pg_url: str, isolation: str | None
) -> None:
    a, b = EventStore(pg_url), _open(pg_url, isolation)
    result = _race(
        pg_url, a,
        lambda: a.append("n", [created("n")], expected_version=0),
        lambda: b.append("n", [created("n")], expected_version=0),
    )
    assert isinstance(result, ConcurrencyError), result
    assert "run 'n' already exists" in str(result)
    assert len(b.read("n")) == 1
    a.close()
    b.close()


def test_concurrent_lease_claims_on_a_fresh_run_have_one_winner(pg_url: str) -> None:
    """INSERT ... ON CONFLICT DO NOTHING: the losers wait for the winner, then see its row."""
    stores = [EventStore(pg_url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    results: dict[str, object] = {}

    def claim(i: int) -> None:
        barrier.wait()
        try:
            results[f"o{i}"] = stores[i].acquire_lease("r", owner=f"o{i}", ttl_s=30)
        except Exception as exc:  # noqa: BLE001 - inspected below
            results[f"o{i}"] = exc

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    winners = [o for o, r in results.items() if not isinstance(r, Exception)]
    assert len(winners) == 1, results
    losers = [r for o, r in results.items() if o not in winners]
    assert all(
        isinstance(r, LeaseHeld) and f"held by owner {winners[0]!r}" in str(r) for r in losers
    ), losers
    for s in stores:
        s.close()


def test_truncate_of_events_is_refused(pg_url: str) -> None:
    with EventStore(pg_url) as store:
        _collecting(store)
    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn, pytest.raises(
            sa.exc.IntegrityError, match="events are immutable: TRUNCATE refused"
        ):
            conn.exec_driver_sql("TRUNCATE events CASCADE")
    finally:
        engine.dispose()
    with EventStore(pg_url) as store:
        assert store.state("r").version == 7


def test_times_are_utc_whatever_the_session_time_zone(pg_url: str) -> None:
    before = datetime.now(UTC)
    with EventStore(pg_url) as store:
        _collecting(store)
    tokyo = sa.make_url(pg_url)
    tokyo = tokyo.update_query_dict(
        {"options": f"{tokyo.query['options']} -ctimezone=Asia/Tokyo"}
    )
    with EventStore(tokyo.render_as_string(hide_password=False)) as store:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW timezone").scalar_one() == "Asia/Tokyo"
        (event_,) = store.read("r", after_seq=6)
        (summary,) = store.list_runs()
    after = datetime.now(UTC)
    for at in (event_.recorded_at, summary.created_at, summary.updated_at):
        assert at.utcoffset().total_seconds() == 0 and before <= at <= after


def test_url_store_appends_and_folds_a_whole_run(pg_url: str) -> None:
    """End to end through ``EventStore("postgresql+psycopg://...")``: a synthetic legal
    run appended in transactions of up to 50 events folds to what memory folds."""
    assert pg_url.startswith("postgresql+psycopg://")
    events = list(legal_run("e2e", batches=3, episodes=12))
    memory = InMemoryEventStore()
    memory.append("e2e", events, expected_version=0)
    with EventStore(pg_url) as store:
        assert store._sql.insert_events.fast and store._sql.insert_events.named
        version = 0
        for start in range(0, len(events), 50):
            version = store.append("e2e", events[start:start + 50], expected_version=version)
        assert version == len(events)
    with EventStore(pg_url) as fresh:  # a new process's view: folded from the database
        state = fresh.state("e2e")
        recorded = fresh.read("e2e")
        (summary,) = fresh.list_runs()
    assert state.state == "completed" and state.version == len(events)
    assert state == memory.state("e2e") == fold("e2e", recorded)
    assert len(state.episodes) == 36 and all(e.done for e in state.episodes.values())
    assert [e.position for e in recorded] == sorted(e.position for e in recorded)
    assert (summary.state, summary.version, summary.goal) == ("completed", len(events), "run")
