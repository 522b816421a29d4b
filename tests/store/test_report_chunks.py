"""The `collection_report` snapshot is a head plus chunks of episodes: an append crossing a
snapshot boundary writes only the chunks that changed, a writer keeps only the chunks in
progress in memory, a missing, stale or corrupt chunk never changes the answer, and the
streamed `report.json` is byte-identical to the full projection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from domain.canonical import sha256_hex
from runtime.collection.results import print_report, write_report
from runtime.files import report_text
from runtime.json_text import NotPlainJSON, indented_json, stream_indented_json
from store import EventStore, NewEvent
from store.projections import episode_chunks as module
from store.projections.collection_report import CollectionReport, collection_report
from store.projections.incremental import ChunkMissing
from tests.store.eventgen import legal_run

KIND = "collection_report"


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "CHUNK_EPISODES", 4)


def _history(batches: int = 3, episodes: int = 10) -> list[NewEvent]:
    return list(legal_run("r", batches, episodes))


def _append_all(store: EventStore, history: list[NewEvent], step: int = 3) -> int:
    version = 0
    for start in range(0, len(history), step):
        version = store.append("r", history[start:start + step], expected_version=version)
    return version


def _chunk_rows(url: str) -> dict[str, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT kind, seq FROM snapshots WHERE kind LIKE 'collection_report/%'"
            )).all()
    finally:
        engine.dispose()
    return dict(rows)


def test_a_boundary_rewrites_only_the_chunks_that_changed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    history = _history()
    store = EventStore(url, snapshot_every=20)
    try:
        version = _append_all(store, history)
        rows = _chunk_rows(url)
        # 3 batches x ceil(10 / 4) chunks, each written last at the boundary after it changed
        # (the last one changed after the last boundary)
        every = {f"{KIND}/{b}.{c}" for b in range(3) for c in range(3)}
        assert set(rows) == every - {f"{KIND}/2.2"}
        assert len(set(rows.values())) > 3  # most chunks were not rewritten at later boundaries
        live = store._live["r"][KIND]
        assert isinstance(live, CollectionReport)
        assert len(live.chunks) <= 2  # the writer holds the chunks in progress, not the report
        assert report_text(store.project("r", KIND).report()) == report_text(
            collection_report(store.read("r"))
        )
        assert version == len(history)
    finally:
        store.close()


def test_report_json_streamed_from_chunks_is_byte_identical(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    history = _history()
    store = EventStore(url, snapshot_every=13)
    version = 0
    try:
        for start in range(0, len(history), 7):
            version = store.append("r", history[start:start + 7], expected_version=version)
            expected = report_text(collection_report(store.read("r")))
            written = write_report(store, "r", tmp_path / "report.json")
            assert (tmp_path / "report.json").read_text() == expected, f"after seq {version}"
            full = json.loads(expected)
            assert written["accepted"] == full["accepted"]
            assert [[e["episode_index"] for e in b["episodes"]] for b in written["batches"]] == [
                [e["episode_index"] for e in b["episodes"]] for b in full["batches"]
            ]
    finally:
        store.close()
    fresh = EventStore(url)  # a new process: the head, the chunks and the tail
    try:
        write_report(fresh, "r", tmp_path / "again.json")
        assert (tmp_path / "again.json").read_text() == expected
        pieces: list[str] = []
        print_report(fresh, "r", pieces.append)
        assert "".join(pieces) == expected
    finally:
        fresh.close()


@pytest.mark.parametrize("damage", ["delete", "body", "older"])
def test_a_damaged_chunk_never_changes_the_report(tmp_path: Path, damage: str) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = EventStore(url, snapshot_every=20)
    _append_all(store, _history())
    expected = report_text(collection_report(store.read("r")))
    store.close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        where = f"kind = '{KIND}/0.1'"
        if damage == "delete":
            conn.execute(sa.text(f"DELETE FROM snapshots WHERE {where}"))
        elif damage == "body":  # rewritten consistently with its own digest, not the head's
            body = json.dumps({"attempts": [], "extra": []})
            conn.execute(sa.text(f"UPDATE snapshots SET body = :b, body_sha256 = :h WHERE {where}"),
                         {"b": body, "h": sha256_hex(body.encode())})
        else:  # a stale row: another seq than the head names
            conn.execute(sa.text(f"UPDATE snapshots SET seq = seq - 1 WHERE {where}"))
    engine.dispose()
    fresh = EventStore(url)
    try:
        assert report_text(fresh.project("r", KIND).report()) == expected
        write_report(fresh, "r", tmp_path / "report.json")
        assert (tmp_path / "report.json").read_text() == expected
        pieces: list[str] = []
        print_report(fresh, "r", pieces.append)  # `show --json`: never half a report
        assert "".join(pieces) == expected
        lazy = fresh.project("r", KIND, lazy=True)
        assert isinstance(lazy, CollectionReport)
        with pytest.raises(ChunkMissing):
            lazy.report()
    finally:
        fresh.close()


def test_a_writer_whose_evicted_chunk_vanished_still_snapshots_correctly(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    history = _history()
    store = EventStore(url, snapshot_every=20)
    try:
        version = _append_all(store, history[:60])
        with store.engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM snapshots WHERE kind LIKE '{KIND}/%'"))
        for start in range(60, len(history), 3):
            version = store.append("r", history[start:start + 3], expected_version=version)
        assert report_text(store.project("r", KIND).report()) == report_text(
            collection_report(store.read("r"))
        )
    finally:
        store.close()


def test_a_version_1_report_snapshot_is_ignored(tmp_path: Path) -> None:
    """The unchunked format of before: its body must never be read as a head."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = EventStore(url, snapshot_every=20)
    _append_all(store, _history())
    expected = report_text(collection_report(store.read("r")))
    with store.engine.begin() as conn:
        conn.execute(sa.text(
            f"UPDATE snapshots SET projection_version = 1 WHERE kind = '{KIND}'"
        ))
    store.close()
    fresh = EventStore(url)
    try:
        tails: list[int] = []
        original = fresh.iter_events

        def counted(run_id: str, *, after_seq: int = 0):  # type: ignore[no-untyped-def]
            tails.append(after_seq)
            return original(run_id, after_seq=after_seq)

        fresh.iter_events = counted  # type: ignore[method-assign]
        assert report_text(fresh.project("r", KIND).report()) == expected
        assert tails == [0]
    finally:
        fresh.close()


def test_streamed_json_equals_the_whole_text() -> None:
    value = {"b": [1, 2.5, None], "a": {"x": "é\n", "y": True}, "c": []}
    for items in ([], [{"k": 1}], [{"k": 1}, [2, {}], "s"]):
        pieces: list[str] = []
        stream_indented_json({**value, "g": (i for i in items)}, pieces.append)
        assert "".join(pieces) == indented_json({**value, "g": items})
        assert "".join(pieces) == json.dumps({**value, "g": items}, sort_keys=True, indent=2)
    with pytest.raises(NotPlainJSON):
        stream_indented_json({"g": (x for x in [float("nan")])}, pieces.append)


def test_the_html_report_numbers_from_snapshot_and_tail_equal_the_whole_log(
    tmp_path: Path,
) -> None:
    """`assetcast report` projects the snapshotted run_report + forensics: after every
    append of a multi-session run (crash, failure, re-run, camera receipts) and in a fresh
    process, its numbers and receipts are the whole log's."""
    from runtime.report.writer import _project
    from store.projections.run_report import run_report
    from tests.store.test_report_snapshots import _several_sessions

    history = _several_sessions()
    for i, event in enumerate(history):  # two receipts naming camera files, one re-run
        if event.type == "TrajectoryCommitted" and event.payload["batch_index"] == 0:
            history[i] = NewEvent(event.type, {**event.payload, "files": [
                {"camera": "c", "path": f"f{i}", "bytes": 1, "sha256": "e" * 64}]})
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = EventStore(url, snapshot_every=7)
    version = 0
    try:
        for start in range(0, len(history), 2):
            version = store.append("r", history[start:start + 2], expected_version=version)
            logged = store.read("r")
            report, receipts = _project(store, "r")
            assert report_text(report) == report_text(run_report(logged)), version
            expected = {}
            for event in logged:
                if event.type == "TrajectoryCommitted" and event.payload.get("files"):
                    key = (event.payload["batch_index"], event.payload["episode_index"])
                    expected[key] = dict(event.payload)
            assert [r.payload for r in receipts] == [expected[k] for k in sorted(expected)]
    finally:
        store.close()
    fresh = EventStore(url)
    try:
        assert fresh._snapshot("r", "run_report") is not None
        report, _ = _project(fresh, "r")
        assert report_text(report) == report_text(run_report(fresh.read("r")))
        assert report["sessions"][0]["end"] is not None and report["events"] == version
    finally:
        fresh.close()
