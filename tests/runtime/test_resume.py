"""Resume after a failure: what is skipped, what is re-run, and what must stop the resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from domain.state import fold
from runtime.collection import CollectionRefused, collect, default_environment_factory
from runtime.collection.recordings import CommittedTrajectoryMissing
from runtime.files import report_text
from runtime.preparation.session_outcome import REPORT_NAME as PREPARATION_REPORT_NAME
from runtime.resume import NothingToResume, ReportsRestored, resume
from store.projections.collection_report import collection_report
from tests.runtime.demo_runs import prepared
from tests.runtime.trajectory_content import content_digest


def interrupting_factory(at_program: int) -> Any:
    """The real environment, but a KeyboardInterrupt at the ``at_program``-th program run."""

    class Interrupting:
        def __init__(self, inner: Any) -> None:
            self.inner, self.count = inner, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def run_program(self, recorder: Any = None) -> Any:
            self.count += 1
            if self.count == at_program:
                raise KeyboardInterrupt
            return self.inner.run_program(recorder)

    def factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
        return Interrupting(
            default_environment_factory(deployment_dir, seed=seed, settle_steps=settle_steps)
        )

    return factory


def commits(store: Any, run_id: str) -> dict[tuple[int, int], str]:
    """Committed episode -> its trajectory's content (the same across runs of one seed)."""
    found: dict[tuple[int, int], str] = {}
    output_dir = Path(store.state(run_id).created["output_dir"])
    for event in store.read(run_id):
        if event.type == "TrajectoryCommitted":
            key = (event.payload["batch_index"], event.payload["episode_index"])
            assert key not in found
            found[key] = content_digest(output_dir / event.payload["path"])
    return found


def interrupted_run(store: Any, out: Path, catalog: Path, at_program: int) -> str:
    run_id = prepared(store, out, catalog, seed=8)
    with pytest.raises(KeyboardInterrupt):
        collect(
            run_id, store=store, environment_factory=interrupting_factory(at_program),
            progress=False,
        )
    return run_id


def test_resume_after_interrupt_matches_an_uninterrupted_run(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    reference = prepared(store, tmp_path / "ref", catalog, seed=8)
    collect(reference, store=store, progress=False)
    # Program run 4 is batch 1, episode 1: batch 0 and episode (1, 0) are done.
    run_id = interrupted_run(store, tmp_path / "out", catalog, at_program=4)
    done_before = set(commits(store, run_id))
    result = resume(run_id, store=store, progress=False)
    events = store.read(run_id)
    assert fold(run_id, events).state == "completed"
    assert commits(store, run_id) == commits(store, reference)
    assert done_before <= set(commits(store, run_id))
    resumed = next(e.payload for e in events if e.type == "RunResumed")
    assert (resumed["from_state"], resumed["to_state"]) == ("failed", "collecting")
    # The second session rebuilt the environment for batch 1 and only re-ran (1, 1).
    built = [e.payload for e in events if e.type == "EnvironmentBuilt"]
    assert [b["batch_index"] for b in built] == [0, 1]
    started = [
        (e.payload["batch_index"], e.payload["episode_index"])
        for e in events if e.type == "EpisodeStarted"
    ]
    assert started == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [e.payload["batch_index"] for e in events if e.type == "BatchStarted"] == [0, 1, 1]
    assert result.environment_constructions == 2
    assert all(b.close_finalized for b in result.batches)
    text = (tmp_path / "out" / "report.json").read_text(encoding="utf-8")
    assert text == report_text(collection_report(events))


def test_resume_of_a_completed_run_says_so(store: Any, tmp_path: Path, catalog: Path) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    collect(run_id, store=store, progress=False)
    with pytest.raises(NothingToResume, match=rf"^run {run_id} is already completed$"):
        resume(run_id, store=store, progress=False)


def test_resume_rewrites_the_report_a_kill_left_stale_and_records_nothing(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    # A failed session writes its report (state failed); the resumed one completes the run.
    # A kill between RunCompleted and the final report leaves exactly that failed report.
    run_id = interrupted_run(store, tmp_path / "out", catalog, at_program=2)
    report_path = tmp_path / "out" / "report.json"
    failed_report = report_path.read_bytes()
    assert b'"failed"' in failed_report
    resume(run_id, store=store, progress=False)
    events = store.read(run_id)
    report_path.write_bytes(failed_report)
    restored = resume(run_id, store=store, progress=False)
    assert isinstance(restored, ReportsRestored)
    assert restored.paths == (report_path,)
    assert report_path.read_text(encoding="utf-8") == report_text(collection_report(events))
    assert store.read(run_id) == events  # a projection was rewritten; the log is untouched
    with pytest.raises(NothingToResume, match=rf"^run {run_id} is already completed$"):
        resume(run_id, store=store, progress=False)


@pytest.mark.parametrize("damage", ["missing", "truncated", "longer"])
def test_resume_rewrites_a_missing_or_altered_report_of_a_completed_run(
    store: Any, tmp_path: Path, catalog: Path, damage: str
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    collect(run_id, store=store, progress=False)
    report_path = tmp_path / "out" / "report.json"
    expected = report_path.read_bytes()
    if damage == "missing":
        report_path.unlink()
    elif damage == "truncated":
        report_path.write_bytes(expected[:-2])
    else:
        report_path.write_bytes(expected + b" ")
    restored = resume(run_id, store=store, progress=False)
    assert restored.paths == (report_path,)
    assert report_path.read_bytes() == expected


def test_resume_rewrites_the_preparation_report_of_a_prepare_only_run(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, goal="prepare")
    report_path = tmp_path / "out" / PREPARATION_REPORT_NAME
    expected = report_path.read_bytes()
    report_path.unlink()
    restored = resume(run_id, store=store, progress=False)
    assert restored.paths == (report_path,)
    assert report_path.read_bytes() == expected
    with pytest.raises(NothingToResume, match=rf"run {run_id} is already prepared"):
        resume(run_id, store=store, progress=False)


def test_collecting_rewrites_a_preparation_report_a_kill_left_missing(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    report_path = tmp_path / "out" / PREPARATION_REPORT_NAME
    expected = report_path.read_bytes()
    report_path.unlink()
    collect(run_id, store=store, progress=False)
    assert report_path.read_bytes() == expected


def test_resume_of_a_prepare_only_run_stops_at_prepared(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, goal="prepare")
    with pytest.raises(NothingToResume, match=rf"run {run_id} is already prepared"):
        resume(run_id, store=store, progress=False)


def test_resume_of_a_prepared_run_goal_run_collects(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    result = resume(run_id, store=store, progress=False)
    assert store.state(run_id).state == "completed"
    assert [len(b.episodes) for b in result.batches] == [1]


def test_missing_committed_trajectory_stops_resume(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = interrupted_run(store, tmp_path / "out", catalog, at_program=4)
    receipt = next(e.payload for e in store.read(run_id) if e.type == "TrajectoryCommitted")
    path = tmp_path / "out" / receipt["path"]
    path.unlink()
    version = store.state(run_id).version
    with pytest.raises(CommittedTrajectoryMissing, match=rf"{path}.* is missing"):
        resume(run_id, store=store, progress=False)
    assert store.state(run_id).version == version  # nothing appended, nothing redone


def test_corrupt_committed_trajectory_stops_resume(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = interrupted_run(store, tmp_path / "out", catalog, at_program=4)
    receipt = next(e.payload for e in store.read(run_id) if e.type == "TrajectoryCommitted")
    path = tmp_path / "out" / receipt["path"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CommittedTrajectoryMissing, match=r"has SHA-256 [0-9a-f]{64}, the log"):
        resume(run_id, store=store, progress=False)


def test_unlogged_recordings_are_moved_to_quarantine(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = interrupted_run(store, tmp_path / "out", catalog, at_program=4)
    session = next(e.payload for e in store.read(run_id) if e.type == "CollectionStarted")
    stray = tmp_path / "out" / session["recording_dir"] / "b0001_e0001.pt"
    stray.write_bytes(b"written just before the crash")
    result = resume(run_id, store=store, progress=False)
    assert result.unlogged_recordings == (stray,)
    assert not stray.exists()  # nothing reading recordings/** sees it any more
    resumer = [e.payload for e in store.read(run_id) if e.type == "RunResumed"][-1]
    moved = tmp_path / "out" / "quarantine" / resumer["session_id"] / stray.relative_to(
        tmp_path / "out"
    )
    assert moved.read_bytes() == b"written just before the crash"
    paths = [  # trajectories and their camera files
        entry["path"]
        for e in store.read(run_id)
        if e.type == "TrajectoryCommitted"
        for entry in [e.payload, *e.payload.get("files", [])]
    ]
    on_disk = sorted(p.relative_to(tmp_path / "out").as_posix()
                     for p in (tmp_path / "out" / "recordings").rglob("*") if p.is_file())
    assert on_disk == sorted(paths)
    assert (1, 1) in commits(store, run_id)


def test_episodes_per_batch_is_fixed_by_the_first_session(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = interrupted_run(store, tmp_path / "out", catalog, at_program=2)
    with pytest.raises(CollectionRefused, match="episodes_per_batch is fixed at 2"):
        resume(run_id, store=store, episodes_per_batch=3, progress=False)


class ResetFails:
    """The real environment, but its ``reset(None)`` after the ``at``-th episode raises."""

    def __init__(self, inner: Any, at: int, error: BaseException) -> None:
        self.inner, self.at, self.error = inner, at, error
        self.nominal_resets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def reset(self, seed: int | None) -> None:
        if seed is None:
            self.nominal_resets += 1
            if self.nominal_resets == self.at:
                raise self.error
        self.inner.reset(seed)


def test_failed_reset_leaves_a_done_episode_without_reset_submitted(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    reference = prepared(store, tmp_path / "ref", catalog, seed=8)
    collect(reference, store=store, progress=False)
    run_id = prepared(store, tmp_path / "out", catalog, seed=8)
    boom = RuntimeError("controller refused to home")
    made: list[ResetFails] = []

    def factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
        inner = default_environment_factory(deployment_dir, seed=seed, settle_steps=settle_steps)
        made.append(ResetFails(inner, at=2, error=boom))
        return made[-1]

    # The second nominal reset follows episode (0, 1), the last of batch 0.
    with pytest.raises(RuntimeError, match="controller refused to home") as caught:
        collect(run_id, store=store, environment_factory=factory, progress=False)
    assert caught.value is boom
    events = store.read(run_id)
    kinds = [e.type for e in events]
    last = max(i for i, e in enumerate(events) if e.type == "EpisodeStarted")
    assert events[last].payload["episode_index"] == 1
    assert kinds[last:] == [
        "EpisodeStarted", "InitialChecked", "EpisodeExecuted", "EpisodeJudged",
        kinds[last + 4], "EnvironmentClosed", "RunFailed",
    ]
    assert kinds[last + 4] in ("TrajectoryCommitted", "TrajectoryDiscarded")
    assert kinds.count("ResetSubmitted") == 1 and "BatchFinished" not in kinds
    failed = events[-1].payload
    assert (failed["phase"], failed["batch_index"], failed["episode_index"]) == ("episode", 0, 1)
    assert failed["error_type"] == "RuntimeError"
    state = fold(run_id, events)  # the log without ResetSubmitted is legal
    assert state.state == "failed"
    assert state.episodes[(0, 1)].done and not state.episodes[(0, 1)].reset_submitted
    report = collection_report(events)
    episodes = {e["episode_index"]: e for e in report["batches"][0]["episodes"]}
    assert episodes[0]["reset_submitted"] is True
    assert episodes[1]["reset_submitted"] is False

    result = resume(run_id, store=store, progress=False)
    events = store.read(run_id)
    assert fold(run_id, events).state == "completed"
    started = [
        (e.payload["batch_index"], e.payload["episode_index"])
        for e in events if e.type == "EpisodeStarted"
    ]
    assert started == [(0, 0), (0, 1), (1, 0), (1, 1)]  # the done episode is not re-run
    assert commits(store, run_id) == commits(store, reference)
    finished = [e.payload for e in events if e.type == "BatchFinished"]
    assert [f["batch_index"] for f in finished] == [0, 1] and finished[0]["attempted"] == 2
    outcome = {(b.batch_index, e.episode_index): e.reset_submitted
               for b in result.batches for e in b.episodes}
    assert outcome == {(0, 0): True, (0, 1): False, (1, 0): True, (1, 1): True}
    assert (tmp_path / "out" / "report.json").read_text(encoding="utf-8") == report_text(
        collection_report(events)
    )


def test_resume_without_a_verified_token_still_checks_chain_inputs_and_files_itself(
    store: Any, tmp_path: Path, catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The --repair path hands its checks on; resume called on its own makes every one of
    them, once: the chain, the deployments/snapshots, and each committed file's hash."""
    import runtime.collection.recordings as recordings_module
    import runtime.verify as verify_module

    out = tmp_path / "out"
    run_id = interrupted_run(store, out, catalog, at_program=4)
    committed = {
        (out / str(entry["path"])).resolve()
        for event in store.read(run_id) if event.type == "TrajectoryCommitted"
        for entry in [event.payload, *event.payload.get("files", [])]
    }
    assert committed
    calls: dict[str, int] = {"chain": 0, "inputs": 0}
    hashed: dict[Path, int] = {}
    real_chain, real_verify = type(store).require_intact_chain, verify_module.verify_events
    real_sha = recordings_module.file_sha256

    def chain(self: Any, checked: str) -> Any:
        calls["chain"] += 1
        return real_chain(self, checked)

    def inputs(checked: str, events: Any, **kwargs: Any) -> Any:
        calls["inputs"] += 1
        return real_verify(checked, events, **kwargs)

    def sha(path: Path) -> str:
        hashed[Path(path).resolve()] = hashed.get(Path(path).resolve(), 0) + 1
        return real_sha(path)

    monkeypatch.setattr(type(store), "require_intact_chain", chain)
    monkeypatch.setattr(verify_module, "verify_events", inputs)
    monkeypatch.setattr(recordings_module, "file_sha256", sha)
    resume(run_id, store=store, progress=False)
    assert calls == {"chain": 1, "inputs": 1}
    assert {p: n for p, n in hashed.items() if p in committed} == {p: 1 for p in committed}
    assert store.state(run_id).state == "completed"
