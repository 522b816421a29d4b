"""Append legality, optimistic concurrency, atomicity, immutability, schema errors on read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from domain.canonical import canonical_json
from domain.errors import (
    ConcurrencyError,
    EventSchemaError,
    IllegalTransition,
    UnknownRun,
)
from domain.events import normalize_payload
from store import EventStore, InMemoryEventStore, NewEvent
from store.records import utcnow
from store.statements import DriverStatement
from tests.store.eventgen import (
    batch_started,
    collection_started,
    created,
    episode,
    legal_run,
    preparation,
)


def core_path_only(s: EventStore) -> EventStore:
    """Route every hot-path statement through ordinary Core execution, as on a dialect
    with named parameters, so both paths are held to the same behaviour."""
    for stmt in vars(s._sql).values():
        if isinstance(stmt, DriverStatement):
            stmt.fast = False
    return s


@pytest.fixture(params=["sql", "sql-core", "memory", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "memory":
        yield InMemoryEventStore()
        return
    if request.param == "postgresql":
        s = EventStore(request.getfixturevalue("pg_url"))
    else:
        s = EventStore(f"sqlite:///{tmp_path / 'p.db'}")
    if request.param == "sql-core":
        core_path_only(s)
    yield s
    s.close()


def collecting(store, run_id: str = "r") -> int:
    return store.append(
        run_id, [created(run_id), *preparation(1), collection_started(), batch_started(0)],
        expected_version=0,
    )


def raw_sql(url: str, statement: str, **params: object) -> list:
    """Run SQL on a plain engine (not the store's), committing, and return any rows."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(statement), params)
            return result.all() if result.returns_rows else []
    finally:
        engine.dispose()


def test_append_read_and_state(store) -> None:
    events = list(legal_run("r", batches=1, episodes=2))
    assert store.append("r", events, expected_version=0) == len(events)
    recorded = store.read("r")
    assert [e.seq for e in recorded] == list(range(1, len(events) + 1))
    assert recorded[0].payload == events[0].payload and recorded[0].recorded_at.tzinfo
    assert [e.seq for e in store.read("r", after_seq=5)][0] == 6
    assert store.state("r").state == "completed"
    (summary,) = store.list_runs()
    assert (summary.run_id, summary.state, summary.version) == ("r", "completed", len(events))


def test_illegal_event_on_append_names_run_seq_type_state(store) -> None:
    version = store.append("r", [created("r")], expected_version=0)
    with pytest.raises(
        IllegalTransition,
        match=r"run 'r' seq 2: EpisodeStarted is illegal in state preparing",
    ):
        store.append("r", episode(0, 0)[:1], expected_version=version)
    assert len(store.read("r")) == 1


def test_batch_with_illegal_event_in_the_middle_writes_nothing(store) -> None:
    version = collecting(store)
    ep = episode(0, 0)
    bad = [*ep[:2], ep[4], *ep[2:]]  # a commit before execution and judgement
    with pytest.raises(IllegalTransition, match=r"seq 10: TrajectoryCommitted"):
        store.append("r", bad, expected_version=version)
    assert len(store.read("r")) == version
    assert store.state("r").version == version and not store.state("r").episodes
    # the cached fold was not corrupted: the legal batch still goes through
    assert store.append("r", ep, expected_version=version) == version + 6


def test_stale_expected_version_raises_and_writes_nothing(store) -> None:
    version = collecting(store)
    store.append("r", episode(0, 0)[:1], expected_version=version)
    with pytest.raises(ConcurrencyError, match=r"run 'r': expected version 7 .* version 8"):
        store.append("r", episode(0, 0)[:1], expected_version=version)
    with pytest.raises(ConcurrencyError, match="already exists"):
        store.append("r", [created("r")], expected_version=0)
    assert len(store.read("r")) == version + 1


def test_unknown_run(store) -> None:
    with pytest.raises(UnknownRun, match="unknown run 'nope'"):
        store.state("nope")
    with pytest.raises(UnknownRun, match="unknown run 'nope'"):
        store.read("nope")
    with pytest.raises(UnknownRun, match="unknown run 'nope'"):
        store.append("nope", episode(0, 0)[:1], expected_version=3)


def test_concurrency_between_two_store_objects_on_one_database(backend_url: str) -> None:
    a, b = EventStore(backend_url), EventStore(backend_url)
    version = collecting(a)
    assert b.state("r").version == version  # b has a cached fold at the same version
    a.append("r", episode(0, 0)[:1], expected_version=version)
    with pytest.raises(ConcurrencyError, match="another session appended first"):
        b.append("r", episode(0, 0)[:1], expected_version=version)
    # b refreshes incrementally and continues from the new version
    assert b.state("r").open_episode == (0, 0)
    assert b.append("r", episode(0, 0)[1:2], expected_version=version + 1) == version + 2
    assert a.state("r").episodes[(0, 0)].initial_passed is True
    assert [e.seq for e in a.read("r")] == list(range(1, version + 3))
    a.close()
    b.close()


def test_cas_rejects_writer_whose_cache_missed_the_db(backend_url: str) -> None:
    """The fold cache says version N, the DB moved on: the version CAS must refuse."""
    a, b = EventStore(backend_url), EventStore(backend_url)
    version = collecting(a)
    b.state("r")
    a.append("r", episode(0, 0)[:1], expected_version=version)
    # b's cached fold is still at the old version; bypass the refresh to hit the CAS.
    folder = b._folds["r"]
    assert folder.state.version == version
    prepared = b._prepare("r", episode(0, 0)[:1], version)
    folder.apply(prepared[0].seq, prepared[0].type, prepared[0].payload)
    with pytest.raises(ConcurrencyError, match="is stale"):
        b._write("r", prepared, version, folder.state, utcnow())
    assert len(a.read("r")) == version + 1
    a.close()
    b.close()


@pytest.mark.parametrize("statement, verb", [
    ("UPDATE events SET payload = '{}' WHERE seq = 1", "UPDATE"),
    ("DELETE FROM events", "DELETE"),
    ("DELETE FROM events WHERE seq = 2", "DELETE"),
])
def test_database_refuses_update_and_delete_of_events(
    backend_store: EventStore, backend_url: str, statement: str, verb: str
) -> None:
    """Refused by the schema itself: a plain connection, not the store, is turned away."""
    collecting(backend_store)
    with pytest.raises(sa.exc.IntegrityError, match=f"events are immutable: {verb} refused"):
        raw_sql(backend_url, statement)
    assert len(backend_store.read("r")) == 7


def _inject(url: str, run_id: str, seq: int, event_type: str, payload: str, version: int) -> None:
    raw_sql(
        url,
        "INSERT INTO events (run_id, seq, type, payload, recorded_at, schema_version) "
        "VALUES (:run_id, :seq, :type, :payload, :at, :version)",
        run_id=run_id, seq=seq, type=event_type, payload=payload,
        at=datetime(2026, 1, 1, tzinfo=UTC), version=version,
    )


def test_unknown_event_type_on_read_raises(backend_store: EventStore, backend_url: str) -> None:
    version = collecting(backend_store)
    _inject(backend_url, "r", version + 1, "EpisodeTeleported", "{}", 1)
    with pytest.raises(EventSchemaError, match=r"run 'r' seq 8 'EpisodeTeleported': unknown"):
        backend_store.read("r")
    with EventStore(backend_url) as other, pytest.raises(
        EventSchemaError, match="unknown event type"
    ):
        other.state("r")


def test_future_schema_version_on_read_raises(
    backend_store: EventStore, backend_url: str
) -> None:
    version = collecting(backend_store)
    _inject(backend_url, "r", version + 1, "EpisodeStarted",
            '{"batch_index":0,"episode_index":0,"seed":1}', 2)
    with pytest.raises(EventSchemaError, match="seq 8 EpisodeStarted: schema_version 2 is newer"):
        backend_store.state("r")


def test_illegal_event_in_stored_log_raises_on_replay(
    backend_store: EventStore, backend_url: str
) -> None:
    version = backend_store.append("r", [created("r")], expected_version=0)
    _inject(backend_url, "r", version + 1, "RunCompleted",
            '{"accepted":0,"attempted":0,"batches":0}', 1)
    with EventStore(backend_url) as other, pytest.raises(
        IllegalTransition, match=r"run 'r' seq 2: RunCompleted is illegal in state preparing"
    ):
        other.state("r")


def test_invalid_json_payload_on_read_raises(backend_store: EventStore, backend_url: str) -> None:
    version = collecting(backend_store)
    _inject(backend_url, "r", version + 1, "ResetSubmitted", "{not json", 1)
    with pytest.raises(EventSchemaError, match="seq 8 ResetSubmitted: payload is not valid JSON"):
        backend_store.read("r")


def test_in_memory_store_also_refuses_bad_stored_rows() -> None:
    mem = InMemoryEventStore()
    mem.append("r", [created("r")], expected_version=0)
    mem._inject("r", "Mystery", "{}", 1)
    with pytest.raises(EventSchemaError, match="'Mystery': unknown event type"):
        mem.state("r")


def test_payloads_are_stored_as_canonical_json(
    backend_store: EventStore, backend_url: str
) -> None:
    backend_store.append("r", [created("r")], expected_version=0)
    ((text,),) = raw_sql(backend_url, "SELECT payload FROM events")
    assert text.startswith('{"config":{"seed":0},"goal":"run",')


def test_sqlite_connection_settings(sql_store: EventStore) -> None:
    with sql_store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000


def test_default_url_comes_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASSETCAST_DB", f"sqlite:///{tmp_path / 'env.db'}")
    with EventStore() as s:
        assert s.url.endswith("env.db")
    monkeypatch.delenv("ASSETCAST_DB")
    monkeypatch.chdir(tmp_path)
    with EventStore() as s:
        assert s.url == "sqlite:///assetcast.db"
    assert (tmp_path / "assetcast.db").exists()


def test_rejects_non_event_payload(store) -> None:
    with pytest.raises(EventSchemaError, match=r"run 'r' seq 1 RunCreated: missing field"):
        store.append("r", [NewEvent("RunCreated", {"run_id": "r"})], expected_version=0)
    with pytest.raises(UnknownRun):
        store.state("r")


def test_driver_path_reads_what_core_reads(backend_store: EventStore, backend_url: str) -> None:
    """Raw driver rows (recorded_at converted by the store) equal Core-processed rows,
    and what the driver path writes reads back identically through Core."""
    sql_store = backend_store
    version = collecting(sql_store)
    sql_store.append("r", episode(0, 0), expected_version=version)
    assert sql_store._sql.select_events.fast and sql_store._sql.insert_events.fast
    assert sql_store._sql.bump_run.fast
    fast = sql_store.read("r", after_seq=2)
    core = core_path_only(EventStore(backend_url))
    assert core.read("r", after_seq=2) == fast
    assert len({e.recorded_at for e in fast}) == 2  # one timestamp per append
    assert all(e.recorded_at.utcoffset() is not None and e.position for e in fast)
    assert core.state("r").version == sql_store.state("r").version == version + 6
    core.close()


def test_cached_fold_does_not_alias_the_callers_payload(store) -> None:
    event = created("r")
    store.append("r", [event], expected_version=0)
    event.payload["config"]["seed"] = 99
    event.payload["goal"] = "prepare"
    assert store.state("r").created["config"] == {"seed": 0}
    assert store.state("r").goal == "run"
    assert store.read("r")[0].payload["config"] == {"seed": 0}


def test_append_normalizes_tuples_and_refuses_non_json(store) -> None:
    version = collecting(store)
    started, checked = episode(0, 0)[:2]
    checked = NewEvent(checked.type, {**checked.payload, "checks": ("a", "b")})
    assert store.append("r", [started, checked], expected_version=version) == version + 2
    assert store.read("r")[-1].payload["checks"] == ["a", "b"]
    bad = NewEvent("ResetSubmitted", {"batch_index": 0, "episode_index": float("nan")})
    with pytest.raises(EventSchemaError, match="ResetSubmitted: payload is not JSON-serializable"):
        store.append("r", [bad], expected_version=version + 2)


@pytest.mark.parametrize("payload", [
    {"b": 1, "a": [1.5, None, True, {"z": "ü", "y": -0.0}], "c": "\u2028\n\"", "d": 1e300},
    {"nested": {"k": (1, 2), "e": {}}, "big": 2**70, "s": "日本"},
])
def test_normalized_text_is_canonical_json_byte_for_byte(payload: dict) -> None:
    data, text = normalize_payload("X", payload)
    assert text == canonical_json(payload)
    assert data == json.loads(text)
