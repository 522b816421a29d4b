"""Snapshots are a cache: a run loaded from snapshot + tail is the run folded from its log,
whatever happens to the snapshot (older fold version, changed event beneath, garbage body,
dropped table)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.state import fold
from store import EventStore, InMemoryEventStore, NewEvent
from store.projections.asset_outcomes import asset_outcomes
from store.projections.audit import run_summary
from store.projections.collection_report import collection_report
from store.projections.forensics import forensics
from store.projections.preparation_report import preparation_report
from store.snapshots import FOLD_KIND, make_record
from tests.store.eventgen import batch_started, collection_started, created, episode, preparation


def _resumed(state: str, session: str) -> NewEvent:
    return NewEvent("RunResumed", {
        "session_id": session, "host": "h", "pid": 2, "from_state": state, "to_state": state,
    })


def _failed(phase: str) -> NewEvent:
    return NewEvent("RunFailed", {
        "phase": phase, "error_type": "Boom", "detail": "d", "traceback": "",
        "batch_index": None, "episode_index": None,
    })


@st.composite
def legal_histories(draw: st.DrawFn) -> list[NewEvent]:
    """Preparation, then batches of episodes with crashes (an episode cut short, then a
    RunResumed restarting it) and failures (RunFailed, then RunResumed) in between."""
    batches = draw(st.integers(1, 3))
    events = [created("r"), *preparation(batches), collection_started(episodes_per_batch=3)]
    resumes = 0
    for b in range(batches):
        events.append(batch_started(b))
        for e in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                cut = draw(st.sampled_from(["EpisodeStarted", "InitialChecked", "EpisodeJudged"]))
                events += episode(b, e, upto=cut)
                resumes += 1
                if draw(st.booleans()):
                    events.append(_failed("episode"))
                    events.append(NewEvent("RunResumed", {
                        "session_id": f"s{resumes}", "host": "h", "pid": 2,
                        "from_state": "failed", "to_state": "collecting",
                    }))
                else:
                    events.append(_resumed("collecting", f"s{resumes}"))
            events += episode(b, e, accepted=draw(st.booleans()))
        events.append(NewEvent("BatchFinished", {"batch_index": b, "accepted": 0, "attempted": 0}))
    if draw(st.booleans()):
        events.append(NewEvent("RunCompleted", {"batches": batches, "accepted": 0, "attempted": 0}))
    return events


def _append_all(store, events: list[NewEvent], chunk: int = 1) -> None:  # type: ignore[no-untyped-def]
    version = 0
    for start in range(0, len(events), chunk):
        version = store.append("r", events[start:start + chunk], expected_version=version)


def _fresh_state(store):  # type: ignore[no-untyped-def]
    store._folds.clear()  # as a new process would: nothing cached, snapshot + tail
    return store.state("r")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=legal_histories(), every=st.integers(1, 7), chunk=st.integers(1, 4))
def test_snapshot_plus_tail_equals_full_fold_for_every_prefix(
    history: list[NewEvent], every: int, chunk: int
) -> None:
    store = InMemoryEventStore(snapshot_every=every)
    version = 0
    for start in range(0, len(history), chunk):
        version = store.append("r", history[start:start + chunk], expected_version=version)
        logged = store.read("r")
        assert _fresh_state(store) == fold("r", logged)
        assert store.project("r", "forensics").report() == forensics(logged)
        assert store.project("r", "digest").summary("r") == run_summary("r", logged)
        assert store.project("r", "asset_outcomes").report() == asset_outcomes(logged)
        assert store.project("r", "collection_report").report() == collection_report(logged)
        assert store.project("r", "preparation_report").report() == preparation_report(logged)
    assert store._snapshots, "the history crossed a boundary but no snapshot was taken"


def _history() -> list[NewEvent]:
    events = [created("r"), *preparation(2), collection_started(episodes_per_batch=4)]
    for b in range(2):
        events.append(batch_started(b))
        for e in range(4):
            events += episode(b, e, accepted=e % 2 == 0)
        events.append(NewEvent("BatchFinished", {"batch_index": b, "accepted": 2, "attempted": 4}))
    return events


@pytest.fixture()
def sqlite_store(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = EventStore(f"sqlite:///{tmp_path / 's.db'}", snapshot_every=10)
    _append_all(store, _history(), chunk=3)
    yield store
    store.close()


def _snapshot_row(store: EventStore, kind: str = FOLD_KIND) -> dict:
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT * FROM snapshots WHERE run_id = 'r' AND kind = :k"), {"k": kind}
        ).mappings().first()
    assert row is not None
    return dict(row)


def _replace_snapshot(store: EventStore, **values: object) -> None:
    sets = ", ".join(f"{k} = :{k}" for k in values)
    with store.engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE snapshots SET {sets} WHERE run_id = 'r'"), values)


def test_sqlite_snapshot_is_written_with_the_events_and_used(sqlite_store: EventStore) -> None:
    row = _snapshot_row(sqlite_store)
    assert row["seq"] % 10 in (0, 1, 2)  # the last event of the append that crossed
    loaded: list[int] = []
    original = sqlite_store._load
    sqlite_store._load = lambda run_id, after: (loaded.append(after), original(run_id, after))[1]  # type: ignore[method-assign]
    assert _fresh_state(sqlite_store) == fold("r", sqlite_store.read("r"))
    assert loaded == [row["seq"]]  # only the tail was read


def _fake_body(store: EventStore) -> str:
    """A well-formed fold body that claims something false (the run completed)."""
    import json

    body = json.loads(_snapshot_row(store)["body"])
    body["state"] = "completed"
    body["episodes_accepted"] = 999
    return json.dumps(body)


def test_snapshot_of_an_older_fold_version_is_ignored_and_rebuilt(
    sqlite_store: EventStore,
) -> None:
    row = _snapshot_row(sqlite_store)
    lying = make_record("r", FOLD_KIND, row["seq"], row["projection_version"] - 1,
                        row["event_digest"], {})
    text = _fake_body(sqlite_store)
    from domain.canonical import sha256_hex

    _replace_snapshot(sqlite_store, projection_version=lying.projection_version, body=text,
                      body_sha256=sha256_hex(text.encode()))
    full = fold("r", sqlite_store.read("r"))
    assert _fresh_state(sqlite_store) == full
    assert sqlite_store.rebuild_snapshots()
    rebuilt = _snapshot_row(sqlite_store)
    assert rebuilt["projection_version"] == row["projection_version"]
    assert rebuilt["seq"] == full.version
    assert _fresh_state(sqlite_store) == full


def test_snapshot_over_a_changed_event_is_ignored(sqlite_store: EventStore) -> None:
    import json

    row = _snapshot_row(sqlite_store)
    full = fold("r", sqlite_store.read("r"))
    assert sqlite_store.read("r")[row["seq"] - 1].type == "BatchFinished"
    with sqlite_store.engine.begin() as conn:  # someone rewrites history beneath the snapshot
        conn.execute(sa.text("DROP TRIGGER events_no_update"))
        text = conn.execute(
            sa.text("SELECT payload FROM events WHERE run_id = 'r' AND seq = :s"),
            {"s": row["seq"]},
        ).scalar_one()
        payload = {**json.loads(text), "attempted": 5}
        conn.execute(
            sa.text("UPDATE events SET payload = :p WHERE run_id = 'r' AND seq = :s"),
            {"p": json.dumps(payload, sort_keys=True), "s": row["seq"]},
        )
    changed = fold("r", sqlite_store.read("r"))
    assert changed != full
    assert _fresh_state(sqlite_store) == changed


def test_snapshot_claiming_another_state_but_matching_nothing_is_ignored(
    sqlite_store: EventStore,
) -> None:
    full = fold("r", sqlite_store.read("r"))
    _replace_snapshot(sqlite_store, body=_fake_body(sqlite_store))  # sha no longer matches
    assert _fresh_state(sqlite_store) == full


@pytest.mark.parametrize("body", ["{not json", "[]", '{"state": "completed"}'])
def test_garbage_snapshot_body_is_ignored(sqlite_store: EventStore, body: str) -> None:
    from domain.canonical import sha256_hex

    full = fold("r", sqlite_store.read("r"))
    _replace_snapshot(sqlite_store, body=body, body_sha256=sha256_hex(body.encode()))
    assert _fresh_state(sqlite_store) == full
    logged = sqlite_store.read("r")
    with sqlite_store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE snapshots SET body = :b, body_sha256 = :h"),
                     {"b": body, "h": sha256_hex(body.encode())})
    assert sqlite_store.project("r", "forensics").report() == forensics(logged)
    assert sqlite_store.project("r", "digest").summary("r") == run_summary("r", logged)


def test_run_loads_identically_when_the_snapshot_table_is_dropped(
    sqlite_store: EventStore, tmp_path: Path
) -> None:
    full = fold("r", sqlite_store.read("r"))
    with sqlite_store.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE snapshots"))
    assert _fresh_state(sqlite_store) == full
    # appending across the next boundary still commits the events (the cache is skipped)
    version = sqlite_store.append("r", [batch_started(2)], expected_version=full.version)
    for e in range(4):
        for event in episode(2, e):
            version = sqlite_store.append("r", [event], expected_version=version)
    assert _fresh_state(sqlite_store) == fold("r", sqlite_store.read("r"))
    assert sqlite_store.project("r", "digest").summary("r")["episodes_attempted"] == 12


def test_runs_row_caches_the_summary_counts(sqlite_store: EventStore) -> None:
    (row,) = sqlite_store.list_runs()
    summary = run_summary("r", sqlite_store.read("r"))
    for name in ("batches_total", "batches_resolved", "batches_done", "episodes_attempted",
                 "episodes_accepted", "trajectories_committed", "failures", "resumes",
                 "output_dir", "last_event_type"):
        assert getattr(row, name) == summary[name], name
    assert row.updated_at.isoformat() == summary["last_event_at"]
    assert row.created_at.isoformat() == summary["created_at"]


def test_snapshots_on_every_backend(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("store.event_store.READ_CHUNK", 7)  # streamed reads cross chunks
    with EventStore(backend_url, snapshot_every=4) as store:
        _append_all(store, _history(), chunk=3)
    with EventStore(backend_url) as fresh:  # a new process: nothing cached
        logged = fresh.read("r")
        assert fresh._snapshot("r", FOLD_KIND) is not None
        assert fresh.state("r") == fold("r", logged)
        assert fresh.project("r", "forensics").report() == forensics(logged)
        assert fresh.project("r", "digest").summary("r") == run_summary("r", logged)
        assert [e.seq for e in fresh.iter_events("r", after_seq=7)] == list(range(8, 61))
        assert [e.seq for e in fresh.iter_events("r")] == [e.seq for e in logged]


def test_append_after_a_fold_restored_from_a_snapshot_keeps_the_hash_chain(
    sqlite_store: EventStore,
) -> None:
    """A new process that restores the fold from a snapshot with no tail must chain its next
    event to the stored hash of the snapshot's event, never to the genesis hash."""
    assert sqlite_store.rebuild_snapshots(["r"])  # the snapshot is at the log's last event
    version = sqlite_store.state("r").version
    url = str(sqlite_store.engine.url)
    with EventStore(url, snapshot_every=10) as fresh:
        loaded: list[int] = []
        original = fresh._load
        fresh._load = lambda run_id, after: (loaded.append(after), original(run_id, after))[1]  # type: ignore[method-assign]
        assert fresh.state("r").version == version
        assert loaded == [version]  # restored from the snapshot: the tail is empty
        done = NewEvent("RunCompleted", {"batches": 2, "accepted": 4, "attempted": 8})
        assert fresh.append("r", [done], expected_version=version) == version + 1
        report = fresh.verify_chain("r")
        assert report.ok and report.events == version + 1, report.summary()
        assert fresh.head_hash("r") == fresh._hash_at("r", version + 1)
