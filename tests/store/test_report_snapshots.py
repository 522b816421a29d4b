"""`report.json` and `preparation.report.json` from snapshot + tail equal the full projection.

Both reports are written at the end of every session; they come from the store's
snapshotted projections, so they must be byte-identical (as written, `report_text`) to the
pure projection of the whole log: written by the appending store, read by a fresh process,
and after `db rebuild-snapshots`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.cli.entry_point import main
from runtime.files import report_text
from store import EventStore, NewEvent
from store.projections.collection_report import collection_report
from store.projections.preparation_report import preparation_report
from tests.store.eventgen import batch_started, collection_started, created, episode, preparation

KINDS = {"collection_report": collection_report, "preparation_report": preparation_report}


def _session(session: str, resumed_from: str | None) -> list[NewEvent]:
    start = (
        [collection_started(session, episodes_per_batch=4)] if resumed_from is None else
        [NewEvent("RunResumed", {"session_id": session, "host": "h", "pid": 2,
                                 "from_state": resumed_from, "to_state": "collecting"})]
    )
    return [*start, NewEvent("EnvironmentBuilt", {
        "session_id": session, "batch_index": 0, "constructions": 1,
    })]


def _closed(session: str, ok: bool) -> NewEvent:
    return NewEvent("EnvironmentClosed", {
        "session_id": session, "ok": ok, "error_type": None if ok else "E", "detail": None,
    })


def _several_sessions() -> list[NewEvent]:
    """Preparation with a rejected candidate, then three collection sessions: one killed
    mid-episode, one failed and closed badly, one that finishes the run."""
    events = [
        created("r"), *preparation(2)[:1],
        NewEvent("CandidatePrepared", {"role": "item", "candidate_id": "c1", "asset_id": "a",
                                       "content_sha256": "c", "snapshot_dir": "cache/c"}),
        NewEvent("CandidateRejected", {"role": "item", "candidate_id": "c2", "stage": "import",
                                       "error_type": "BadMesh", "detail": "no faces"}),
        *preparation(2)[1:],
    ]
    events += _session("s1", None) + [batch_started(0)]
    events += episode(0, 0) + episode(0, 1, accepted=False) + episode(0, 2, upto="EpisodeJudged")
    events += _session("s2", "collecting") + [batch_started(0)]
    events += episode(0, 2) + episode(0, 3)
    events.append(NewEvent("BatchFinished", {"batch_index": 0, "accepted": 3, "attempted": 4}))
    events += [batch_started(1), *episode(1, 0, upto="TrajectoryCommitted")]
    events.append(NewEvent("RunFailed", {
        "phase": "episode", "error_type": "Boom", "detail": "d", "traceback": "",
        "batch_index": 1, "episode_index": 1,
    }))
    events += [_closed("s2", False), *_session("s3", "failed"), batch_started(1)]
    for e in range(1, 4):
        events += episode(1, e, accepted=e != 2)
    events.append(NewEvent("BatchFinished", {"batch_index": 1, "accepted": 2, "attempted": 4}))
    events += [_closed("s3", True), NewEvent("RunCompleted", {
        "batches": 2, "accepted": 6, "attempted": 8,
    })]
    return events


def _texts(store: EventStore) -> dict[str, tuple[str, str]]:
    """(incremental, full) report text of each kind."""
    logged = store.read("r")
    return {
        kind: (report_text(store.project("r", kind).report()), report_text(full(logged)))
        for kind, full in KINDS.items()
    }


@pytest.mark.parametrize("chunk", [1, 4])
def test_reports_from_snapshot_and_tail_are_byte_identical(tmp_path: Path, chunk: int) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    history = _several_sessions()
    store = EventStore(url, snapshot_every=7)
    version = 0
    for start in range(0, len(history), chunk):
        version = store.append("r", history[start:start + chunk], expected_version=version)
        for kind, (incremental, full) in _texts(store).items():
            assert incremental == full, f"{kind} differs after seq {version}"
    store.close()

    fresh = EventStore(url)  # a new process: nothing live, the stored snapshots + the tail
    try:
        seqs = {kind: fresh._snapshot("r", kind).seq for kind in KINDS}  # type: ignore[union-attr]
        assert all(0 < seq < version for seq in seqs.values()), seqs  # a real tail remains
        tails: list[int] = []
        original = fresh.iter_events

        def counted(run_id: str, *, after_seq: int = 0):  # type: ignore[no-untyped-def]
            tails.append(after_seq)
            return original(run_id, after_seq=after_seq)

        fresh.iter_events = counted  # type: ignore[method-assign]
        texts = _texts(fresh)
        assert tails == [seqs["collection_report"], seqs["preparation_report"]]
        for kind, (incremental, full) in texts.items():
            assert incremental == full, kind
        report = fresh.project("r", "collection_report").report()
        assert report["sessions"] == ["s1"] and report["status"] == "completed"
        assert (report["accepted"], report["attempted"]) == (6, 8)
        prepared = fresh.project("r", "preparation_report").report()
        assert prepared["roles"]["item"]["prepared"] == 1
        assert prepared["roles"]["item"]["rejections"][0]["error_type"] == "BadMesh"
    finally:
        fresh.close()


def test_reports_after_db_rebuild_snapshots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = EventStore(url, snapshot_every=5)
    store.append("r", _several_sessions(), expected_version=0)
    store.close()
    assert main(["db", "rebuild-snapshots", "--db", url]) == 0
    capsys.readouterr()
    rebuilt = EventStore(url)
    try:
        last = len(rebuilt.read("r"))
        for kind in KINDS:
            assert rebuilt._snapshot("r", kind).seq == last  # type: ignore[union-attr]
        for kind, (incremental, full) in _texts(rebuilt).items():
            assert incremental == full, kind
        assert main(["show", "r", "--json", "--db", url]) == 0
        assert capsys.readouterr().out == report_text(collection_report(rebuilt.read("r")))
    finally:
        rebuilt.close()


@pytest.mark.parametrize("body", ['{"seq": 1, "state": {}}', '{"seq": 1, "state": []}'])
def test_a_report_snapshot_that_does_not_decode_is_ignored(tmp_path: Path, body: str) -> None:
    """Its SHA-256 matches (as if written so), yet the body is no report state."""
    import sqlalchemy as sa

    from domain.canonical import sha256_hex

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = EventStore(url, snapshot_every=5)
    store.append("r", _several_sessions(), expected_version=0)
    with store.engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE snapshots SET body = :b, body_sha256 = :h "
            "WHERE kind IN ('collection_report', 'preparation_report')"
        ), {"b": body, "h": sha256_hex(body.encode())})
    store.close()
    fresh = EventStore(url)
    try:
        for kind, (incremental, full) in _texts(fresh).items():
            assert incremental == full, kind
    finally:
        fresh.close()


def test_the_collector_is_paused_only_while_a_report_is_built(tmp_path: Path) -> None:
    import gc

    from store.gc_pause import gc_paused

    seen: list[bool] = []
    store = EventStore(f"sqlite:///{tmp_path / 's.db'}", snapshot_every=5)
    try:
        store.append("r", _several_sessions(), expected_version=0)
        original = store.iter_events

        def watched(run_id: str, *, after_seq: int = 0):  # type: ignore[no-untyped-def]
            seen.append(gc.isenabled())
            return original(run_id, after_seq=after_seq)

        store.iter_events = watched  # type: ignore[method-assign]
        store.project("r", "collection_report")
        assert seen == [False] and gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()
        store.close()
