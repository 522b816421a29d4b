"""Audit projection over synthetic, schema-valid, lifecycle-legal event logs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from domain.events import validate_payload
from domain.state import fold
from store.projections.asset_outcomes import AssetOutcomes, asset_outcomes
from store.projections.audit import audit, audit_logs, episode_outcomes, run_summary
from store.projections.incremental import Projector, snapshotted
from store.records import RecordedEvent

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
SHA = {name: name[0] * 64 for name in ("alpha", "bravo", "charlie")}


class LogBuilder:
    """Appends schema-checked events with consecutive seqs, one second apart."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.events: list[RecordedEvent] = []

    def add(self, event_type: str, **payload: Any) -> LogBuilder:
        validate_payload(event_type, payload)
        seq = len(self.events) + 1
        when = T0 + timedelta(seconds=seq)
        self.events.append(RecordedEvent(seq, self.run_id, seq, event_type, payload, when, 1))
        return self

    def episode(self, b: int, e: int, *, accepted: bool, stop_after: str | None = None) -> None:
        steps: list[tuple[str, dict[str, Any]]] = [
            ("EpisodeStarted", {"seed": 100 * b + e}),
            ("InitialChecked", {"passed": True, "checks": []}),
            ("EpisodeExecuted", {"completed": True, "steps": 10, "skills": [], "detail": ""}),
            (
                "EpisodeJudged",
                {"accepted": accepted, "checks": [], "reason": "" if accepted else "not_inside"},
            ),
            (
                (
                    "TrajectoryCommitted",
                    {"path": f"rec/b{b}_e{e}.pt", "bytes": 3, "sha256": "0" * 64},
                )
                if accepted
                else ("TrajectoryDiscarded", {"reason": "rejected"})
            ),
            ("ResetSubmitted", {}),
        ]
        for event_type, payload in steps:
            self.add(event_type, batch_index=b, episode_index=e, **payload)
            if event_type == stop_after:
                return


def _created(b: LogBuilder, goal: str = "run") -> None:
    b.add(
        "RunCreated", run_id=b.run_id, goal=goal, task_id="place_item_in_bin",
        task_path="/t/task.yaml", task_sha256="f" * 64,
        config={"seed": 0, "max_batches": 2, "episodes_per_batch": 2, "candidates_per_role": 32,
                "max_search_nodes": 1000, "settle_steps": 0, "record_trajectory": True},
        providers={}, output_dir="/out", tool_version="test",
    )


def _prepared(b: LogBuilder) -> None:
    b.add("PreparationStarted", session_id="p" * 12, host="h", pid=1)
    b.add("CandidatePrepared", role="item", candidate_id="c-alpha", asset_id="alpha",
          content_sha256=SHA["alpha"], snapshot_dir="/c/a")
    b.add("CandidatePrepared", role="bin", candidate_id="c-bravo", asset_id="bravo",
          content_sha256=SHA["bravo"], snapshot_dir="/c/b")
    b.add("CandidateRejected", role="item", candidate_id="c-broken", stage="prepare",
          error_type="AssetValidationError", detail="bounds_m does not match the mesh")
    for index in range(2):
        b.add("BatchResolved", batch_index=index, seed=index, asset_set_id=f"set{index}",
              requirements_digest="d" * 64, search_nodes=2,
              assets={"item": {"asset_id": "alpha", "content_sha256": SHA["alpha"]},
                      "bin": {"asset_id": "bravo", "content_sha256": SHA["bravo"]}})
        b.add("DeploymentMaterialized", batch_index=index, asset_set_id=f"set{index}",
              deployment_path=f"/out/batch_{index:04d}", manifest_sha256="e" * 64)
    b.add("PreparationCompleted", batches=2)


def _collection_start(b: LogBuilder, session: str) -> None:
    b.add("CollectionStarted", session_id=session, host="h", pid=2, episodes_per_batch=2,
          record_trajectory=True, recording_dir=f"/out/recordings/run_{session}")
    b.add("EnvironmentBuilt", session_id=session, batch_index=0, constructions=1)


def _batch_start(b: LogBuilder, index: int) -> None:
    b.add("BatchStarted", batch_index=index, asset_set_id=f"set{index}", seed=index,
          deployment_path=f"/out/batch_{index:04d}")
    b.add("AssetsReplaced", batch_index=index, roles_replaced=["item", "bin"], entities_kept=[])


def completed_run(run_id: str = "run-a") -> list[RecordedEvent]:
    """Two batches, 3 of 4 episodes accepted, one resume after a crash mid-episode."""
    b = LogBuilder(run_id)
    _created(b)
    _prepared(b)
    _collection_start(b, "s" * 12)
    _batch_start(b, 0)
    b.episode(0, 0, accepted=True)
    b.episode(0, 1, accepted=False)
    b.add("BatchFinished", batch_index=0, accepted=1, attempted=2)
    _batch_start(b, 1)
    b.episode(1, 0, accepted=True, stop_after="EpisodeJudged")  # crash: judged, not committed
    b.add("RunResumed", session_id="r" * 12, host="h", pid=3, from_state="collecting",
          to_state="collecting")
    _collection_start(b, "r" * 12)
    _batch_start(b, 1)
    b.episode(1, 0, accepted=True)
    b.episode(1, 1, accepted=True)
    b.add("BatchFinished", batch_index=1, accepted=2, attempted=2)
    b.add("EnvironmentClosed", session_id="r" * 12, ok=True, error_type=None, detail=None)
    b.add("RunCompleted", batches=2, accepted=3, attempted=4)
    return b.events


def crashed_run(run_id: str = "run-b") -> list[RecordedEvent]:
    """Collection killed in batch 0 episode 1 after its initial checks (no close, no failure)."""
    b = LogBuilder(run_id)
    _created(b)
    _prepared(b)
    _collection_start(b, "k" * 12)
    _batch_start(b, 0)
    b.episode(0, 0, accepted=True)
    b.episode(0, 1, accepted=True, stop_after="InitialChecked")
    return b.events


def unresolvable_run(run_id: str = "run-c") -> list[RecordedEvent]:
    b = LogBuilder(run_id)
    _created(b, goal="prepare")
    b.add("PreparationStarted", session_id="p" * 12, host="h", pid=1)
    b.add("CandidatePrepared", role="item", candidate_id="c-charlie", asset_id="charlie",
          content_sha256=SHA["charlie"], snapshot_dir="/c/c")
    b.add("BatchUnresolvable", batch_index=0, seed=0, error_type="MatchingError",
          detail="no asset set", search_nodes=1, budget_exhausted=False, role_summaries={},
          rejections=[{"role": "item", "asset_id": "charlie", "code": "extent_exceeded",
                       "detail": "0.2 > 0.12", "target_role": None}])
    b.add("RunFailed", phase="preparing", error_type="PreparationFailed", detail="batch 0",
          traceback="Traceback ...", batch_index=0, episode_index=None)
    return b.events


class FakeStore:
    def __init__(self, logs: dict[str, list[RecordedEvent]]) -> None:
        self.logs = logs

    def list_runs(self) -> list[str]:
        return list(self.logs)

    def read(self, run_id: str, *, after_seq: int = 0) -> list[RecordedEvent]:
        return [e for e in self.logs[run_id] if e.seq > after_seq]

    def run_ids(self) -> list[str]:
        return list(self.logs)

    def iter_events(self, run_id: str, *, after_seq: int = 0) -> Iterator[RecordedEvent]:
        yield from self.read(run_id, after_seq=after_seq)

    def project(self, run_id: str, kind: str) -> Projector:
        projector = snapshotted()[kind]()
        for event in self.logs[run_id]:
            projector.apply(event)
        return projector


def test_synthetic_logs_are_legal_for_the_fold() -> None:
    assert fold("run-a", completed_run()).state == "completed"
    assert fold("run-b", crashed_run("run-b")).state == "collecting"
    assert fold("run-c", unresolvable_run("run-c")).state == "failed"


def test_interrupted_judgement_does_not_count_and_rerun_supersedes_it() -> None:
    outcomes = episode_outcomes(completed_run())
    assert sorted(outcomes) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [outcomes[k]["accepted"] for k in sorted(outcomes)] == [True, False, True, True]
    assert episode_outcomes(crashed_run()).keys() == {(0, 0)}


def test_run_summary_counts_done_work() -> None:
    summary = run_summary("run-a", completed_run())
    assert summary["state"] == "completed"
    assert summary["task_id"] == "place_item_in_bin"
    assert (summary["batches_done"], summary["batches_total"]) == (2, 2)
    assert (summary["episodes_accepted"], summary["episodes_attempted"]) == (3, 4)
    assert summary["resumes"] == 1
    assert summary["last_event_type"] == "RunCompleted"
    assert summary["created_at"] == (T0 + timedelta(seconds=1)).isoformat()


def test_audit_per_asset_usage_and_rejections() -> None:
    report = audit(
        FakeStore({"run-a": completed_run(), "run-b": crashed_run(), "run-c": unresolvable_run()})
    )
    assets = {a["asset_id"]: a for a in report["assets"]}
    alpha = assets["alpha"]
    assert alpha["content_sha256"] == SHA["alpha"]
    assert alpha["roles"] == ["item"]
    assert alpha["runs"] == ["run-a", "run-b"]
    assert len(alpha["batches"]) == 4
    # run-a: 4 done episodes (3 accepted); run-b: 1 done (accepted); the crashed one is not done
    assert (alpha["episodes_attempted"], alpha["episodes_accepted"]) == (5, 4)
    assert alpha["episode_rejections"] == {"not_inside": 1}  # run-a batch 0 episode 1
    assert assets["bravo"]["roles"] == ["bin"]
    charlie = assets["charlie"]
    assert charlie["runs"] == [] and charlie["prepared_in_runs"] == ["run-c"]
    assert [(r["stage"], r["code"], r["batch_index"]) for r in charlie["rejections"]] == [
        ("matching", "extent_exceeded", 0)
    ]
    broken = report["unprepared_candidates"]
    assert [(c["role"], c["candidate_id"]) for c in broken] == [("item", "c-broken")]
    assert {r["run_id"] for r in broken[0]["rejections"]} == {"run-a", "run-b"}
    assert broken[0]["rejections"][0]["detail"] == "bounds_m does not match the mesh"
    states = {r["run_id"]: r["state"] for r in report["runs"]}
    assert states == {"run-a": "completed", "run-b": "collecting", "run-c": "failed"}


def test_audit_is_deterministic_and_json_ready() -> None:

    logs = {"run-b": crashed_run(), "run-a": completed_run()}
    first = json.dumps(audit_logs(logs), sort_keys=True, allow_nan=False)
    second = json.dumps(audit_logs(dict(reversed(list(logs.items())))), sort_keys=True)
    assert first == second


def test_episode_outcomes_name_the_cause_of_each_rejection() -> None:
    b = LogBuilder("run-why")
    _created(b)
    _prepared(b)
    _collection_start(b, "s" * 12)
    _batch_start(b, 0)
    ids = {"batch_index": 0}
    failed_check = {"name": "on_table", "status": "failed", "detail": "lifted", "metrics": {}}
    passed_check = {"name": "at_rest", "status": "passed", "detail": "", "metrics": {}}
    missing_check = {"name": "mine", "status": "unavailable", "detail": "raised", "metrics": {}}
    # episode 0: measured checks fail
    b.add("EpisodeStarted", **ids, episode_index=0, seed=1)
    b.add("InitialChecked", **ids, episode_index=0, passed=True, checks=[passed_check])
    b.add("EpisodeExecuted", **ids, episode_index=0, completed=True, steps=5, skills=[], detail="")
    b.add("EpisodeJudged", **ids, episode_index=0, accepted=False,
          checks=[passed_check, failed_check], reason="final_checks_failed")
    b.add("TrajectoryDiscarded", **ids, episode_index=0, reason="final_checks_failed")
    b.add("ResetSubmitted", **ids, episode_index=0)
    # episode 1: the program stops at pick; then an initial check is unavailable
    pick = {"skill": "pick", "object": "item", "completed": False, "detail": "too wide"}
    b.add("EpisodeStarted", **ids, episode_index=1, seed=2)
    b.add("InitialChecked", **ids, episode_index=1, passed=True, checks=[])
    b.add("EpisodeExecuted", **ids, episode_index=1, completed=False, steps=0, skills=[pick],
          detail="too wide")
    b.add("EpisodeJudged", **ids, episode_index=1, accepted=False, checks=[],
          reason="program_incomplete")
    b.add("TrajectoryDiscarded", **ids, episode_index=1, reason="program_incomplete")
    b.add("ResetSubmitted", **ids, episode_index=1)
    fold("run-why", b.events)
    audited = {a["asset_id"]: a for a in audit_logs({"run-why": b.events})["assets"]}
    for name in ("alpha", "bravo"):  # both assets of the batch share its episodes' fate
        assert (audited[name]["episodes_attempted"], audited[name]["episodes_accepted"]) == (2, 0)
        assert audited[name]["episode_rejections"] == {
            "final_checks_failed: on_table failed": 1,
            "program_incomplete: pick item": 1,
        }
    outcomes = episode_outcomes(b.events)
    assert outcomes[(0, 0)]["cause"] == "on_table failed"
    assert outcomes[(0, 1)]["cause"] == "pick item"
    c = LogBuilder("run-init")
    _created(c)
    _prepared(c)
    _collection_start(c, "t" * 12)
    _batch_start(c, 0)
    c.add("EpisodeStarted", **ids, episode_index=0, seed=1)
    c.add("InitialChecked", **ids, episode_index=0, passed=False, checks=[missing_check])
    c.add("EpisodeJudged", **ids, episode_index=0, accepted=False, checks=[],
          reason="initial_checks_failed")
    c.add("TrajectoryDiscarded", **ids, episode_index=0, reason="initial_checks_failed")
    c.add("ResetSubmitted", **ids, episode_index=0)
    fold("run-init", c.events)
    assert episode_outcomes(c.events)[(0, 0)]["cause"] == "mine unavailable"


def test_asset_outcomes_per_role_most_frequent_reason_first() -> None:
    b = LogBuilder("run-many")
    _created(b)
    _prepared(b)
    _collection_start(b, "s" * 12)
    _batch_start(b, 0)
    ids = {"batch_index": 0}
    failed = {"name": "inside_region", "status": "failed", "detail": "", "metrics": {}}
    pick = {"skill": "pick", "object": "item", "completed": False, "detail": "too wide"}
    for e, why in enumerate(["checks", "pick", "checks", "ok"]):
        b.add("EpisodeStarted", **ids, episode_index=e, seed=e)
        b.add("InitialChecked", **ids, episode_index=e, passed=True, checks=[])
        b.add("EpisodeExecuted", **ids, episode_index=e, completed=why != "pick", steps=1,
              skills=[pick] if why == "pick" else [], detail="")
        reason = {"checks": "final_checks_failed", "pick": "program_incomplete"}.get(
            why, "accepted")
        b.add("EpisodeJudged", **ids, episode_index=e, accepted=why == "ok",
              checks=[failed] if why == "checks" else [], reason=reason)
        if why == "ok":
            b.add("TrajectoryCommitted", **ids, episode_index=e, path=f"r/b0_e{e}.pt", bytes=1,
                  sha256="0" * 64)
        else:
            b.add("TrajectoryDiscarded", **ids, episode_index=e, reason=reason)
        b.add("ResetSubmitted", **ids, episode_index=e)
    b.episode(0, 4, accepted=False, stop_after="EpisodeJudged")  # not done: not counted
    fold("run-many", b.events)
    rows = {r["role"]: r for r in asset_outcomes(b.events)}
    assert sorted(rows) == ["bin", "item"]
    item = rows["item"]
    assert (item["asset_id"], item["attempted"], item["accepted"]) == ("alpha", 4, 1)
    assert list(item["rejections"].items()) == [
        ("final_checks_failed: inside_region failed", 2),
        ("program_incomplete: pick item", 1),
    ]
    # incremental: stopping anywhere, dumping and restoring, then going on gives the same
    for cut in range(1, len(b.events)):
        head = AssetOutcomes()
        for event in b.events[:cut]:
            head.apply(event)
        resumed = AssetOutcomes.restore(json.loads(json.dumps(head.dump())))
        for event in b.events[cut:]:
            resumed.apply(event)
        assert resumed.report() == asset_outcomes(b.events)
