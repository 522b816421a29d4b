"""One run at a glance, accumulated event by event: the ``runs``/``show`` summary, the last
failure, and per-batch aggregates of done episodes (the batch table of ``show``).

State is bounded by the answer: per batch a few counters and the reasons episodes were
rejected; per *open* episode its judgement and cause until its commit-or-discard; nothing
per done episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from store.projections.audit import (
    EventLike,
    _failed_checks,
    _failed_skill,
    episode_key,
    event_time,
    lifecycle_state,
)
from store.projections.incremental import Projector


class RunDigest(Projector):
    KIND = "digest"
    VERSION = 1

    def __init__(self) -> None:
        super().__init__()
        self.created: dict[str, Any] = {}
        self.prepared_batches: Any = None
        self.has_prepared = False
        self.resolved: dict[int, dict[str, Any]] = {}
        self.deployments: dict[int, str] = {}
        self.finished: set[int] = set()
        self.state: str | None = None
        self.first_at: str | None = None
        self.last_at: str | None = None
        self.last_type: str | None = None
        self.failures = 0
        self.resumes = 0
        self.last_failure: dict[str, Any] | None = None
        self.collection_started = False
        # open episodes: key -> [accepted, judgement, cause]
        self.open: dict[tuple[int, int], list[Any]] = {}
        # per batch: {"accepted", "attempted", "committed", "reasons": {why: n}, "folders": set}
        self.batches: dict[int, dict[str, Any]] = {}

    def _batch(self, index: int) -> dict[str, Any]:
        found = self.batches.get(index)
        if found is None:
            found = self.batches[index] = {
                "accepted": 0, "attempted": 0, "committed": 0, "reasons": {}, "folders": set(),
            }
        return found

    def _apply(self, event: EventLike) -> None:
        kind, p = event.type, event.payload
        at = event_time(event)
        if self.seq == 0:
            self.first_at = at
        self.last_at, self.last_type = at, kind
        now = lifecycle_state([event])
        if now is not None:
            self.state = now
        if kind == "RunCreated":
            if not self.created:
                self.created = dict(p)
        elif kind == "PreparationCompleted":
            self.prepared_batches, self.has_prepared = p.get("batches"), True
        elif kind == "BatchResolved":
            self.resolved[int(p["batch_index"])] = {
                role: a["asset_id"] for role, a in p["assets"].items()
            }
        elif kind == "DeploymentMaterialized":
            self.deployments[int(p["batch_index"])] = p["deployment_path"]
        elif kind == "BatchFinished":
            self.finished.add(int(p["batch_index"]))
        elif kind == "RunFailed":
            self.failures += 1
            self.last_failure = dict(p)
        elif kind == "RunResumed":
            self.resumes += 1
        elif kind == "CollectionStarted":
            self.collection_started = True
        else:
            self._episode(kind, p)

    def _episode(self, kind: str, p: Any) -> None:
        if kind == "EpisodeStarted":
            self.open[episode_key(p)] = [False, "not judged", None]
        elif kind == "InitialChecked" and not p["passed"]:
            self._open(p)[2] = _failed_checks(p["checks"])
        elif kind == "EpisodeExecuted" and not p["completed"]:
            self._open(p)[2] = _failed_skill(p["skills"])
        elif kind == "EpisodeJudged":
            entry = self._open(p)
            entry[0], entry[1] = bool(p["accepted"]), str(p.get("reason", ""))
            if not p["accepted"] and p["checks"]:
                entry[2] = _failed_checks(p["checks"])
        elif kind in ("TrajectoryCommitted", "TrajectoryDiscarded"):
            key = episode_key(p)
            accepted, judgement, cause = self.open.pop(key, [False, "not judged", None])
            batch = self._batch(key[0])
            batch["attempted"] += 1
            if accepted:
                batch["accepted"] += 1
            else:
                why = f"{judgement} ({cause})" if cause else judgement
                batch["reasons"][why] = batch["reasons"].get(why, 0) + 1
            if kind == "TrajectoryCommitted":
                batch["committed"] += 1
                batch["folders"].add(str(Path(p["path"]).parent))

    def _open(self, p: Any) -> list[Any]:
        key = episode_key(p)
        found = self.open.get(key)
        if found is None:
            found = self.open[key] = [False, "not judged", None]
        return found

    # -- snapshot ---------------------------------------------------------------------
    def _dump(self) -> Any:
        return {
            "created": self.created, "prepared_batches": self.prepared_batches,
            "has_prepared": self.has_prepared,
            "resolved": [[i, a] for i, a in sorted(self.resolved.items())],
            "deployments": [[i, d] for i, d in sorted(self.deployments.items())],
            "finished": sorted(self.finished), "state": self.state, "first_at": self.first_at,
            "last_at": self.last_at, "last_type": self.last_type, "failures": self.failures,
            "resumes": self.resumes, "last_failure": self.last_failure,
            "collection_started": self.collection_started,
            "open": [[k[0], k[1], v] for k, v in self.open.items()],
            "batches": [
                [i, {**b, "folders": sorted(b["folders"])}] for i, b in sorted(self.batches.items())
            ],
        }

    def _restore(self, s: Any) -> None:
        self.created = dict(s["created"])
        self.prepared_batches, self.has_prepared = s["prepared_batches"], s["has_prepared"]
        self.resolved = {int(i): dict(a) for i, a in s["resolved"]}
        self.deployments = {int(i): str(d) for i, d in s["deployments"]}
        self.finished = {int(i) for i in s["finished"]}
        self.state, self.first_at, self.last_at = s["state"], s["first_at"], s["last_at"]
        self.last_type, self.failures, self.resumes = s["last_type"], s["failures"], s["resumes"]
        self.last_failure = s["last_failure"]
        self.collection_started = bool(s["collection_started"])
        self.open = {(int(b), int(e)): list(v) for b, e, v in s["open"]}
        self.batches = {
            int(i): {**b, "reasons": dict(b["reasons"]), "folders": set(b["folders"])}
            for i, b in s["batches"]
        }

    # -- answers ----------------------------------------------------------------------
    def summary(self, run_id: str) -> dict[str, Any]:
        """What :func:`store.projections.audit.run_summary` returns for the same log."""
        config = self.created.get("config") or {}
        total = self.prepared_batches if self.has_prepared else config.get("max_batches")
        done = self.batches.values()
        return {
            "run_id": run_id,
            "task_id": self.created.get("task_id"),
            "goal": self.created.get("goal"),
            "output_dir": self.created.get("output_dir"),
            "state": self.state,
            "created_at": self.first_at,
            "last_event_at": self.last_at,
            "last_event_type": self.last_type,
            "version": self.seq,
            "batches_total": total,
            "batches_resolved": len(self.resolved),
            "batches_done": len(self.finished),
            "episodes_attempted": sum(b["attempted"] for b in done),
            "episodes_accepted": sum(b["accepted"] for b in done),
            "trajectories_committed": sum(b["committed"] for b in done),
            "failures": self.failures,
            "resumes": self.resumes,
        }

    def batch_rows(self) -> list[dict[str, Any]]:
        """Per resolved batch: assets (role -> asset_id), counts, rejection reasons, the
        folders of its committed trajectories and its deployment path."""
        rows = []
        for index in sorted(self.resolved):
            batch = self.batches.get(index) or self._batch_template()
            rows.append({
                "batch_index": index,
                "assets": self.resolved[index],
                "accepted": batch["accepted"],
                "attempted": batch["attempted"],
                "reasons": dict(sorted(batch["reasons"].items())),
                "folders": sorted(batch["folders"]),
                "deployment": self.deployments.get(index),
            })
        return rows

    @staticmethod
    def _batch_template() -> dict[str, Any]:
        return {"accepted": 0, "attempted": 0, "committed": 0, "reasons": {}, "folders": set()}
