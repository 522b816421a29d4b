"""Episode results per asset: how often each asset was attempted, accepted, and why not.

Preparation rejections say whether an asset could be used at all; this answers what
happened when it was: every *done* episode (its commit-or-discard is in the log) counts once
for each asset of its batch, as accepted or under its rejection reason. A reason is the
judgement plus what caused it, e.g. ``final_checks_failed: inside_region failed`` or
``program_incomplete: pick item``, so an auditor sees *which* check or skill an asset keeps
failing, with counts.

The projector is snapshotted with the others (``store.projections.incremental``): its state
is per batch, per asset and per open episode, never per event.
"""

from __future__ import annotations

from typing import Any

from store.projections.audit import EventLike, _failed_checks, _failed_skill, episode_key
from store.projections.incremental import Projector


def _asset_key(asset_id: str, sha: str, role: str) -> str:
    return f"{asset_id}\n{sha}\n{role}"


class AssetOutcomes(Projector):
    """Per (asset, role): episodes attempted, accepted and rejected by reason."""

    KIND = "asset_outcomes"
    VERSION = 1

    def __init__(self) -> None:
        super().__init__()
        self.batches: dict[int, dict[str, list[str]]] = {}  # batch -> role -> [id, sha]
        self.open: dict[tuple[int, int], dict[str, Any]] = {}  # judged, not yet done
        self.assets: dict[str, dict[str, Any]] = {}

    def _apply(self, event: EventLike) -> None:
        kind, p = event.type, event.payload
        if kind == "BatchResolved":
            self.batches[int(p["batch_index"])] = {
                role: [str(a["asset_id"]), str(a["content_sha256"])]
                for role, a in p["assets"].items()
            }
        elif kind == "EpisodeStarted":
            self.open[episode_key(p)] = {"accepted": False, "reason": "not judged", "cause": None}
        elif kind == "InitialChecked" and not p["passed"]:
            self._open(p)["cause"] = _failed_checks(p["checks"])
        elif kind == "EpisodeExecuted" and not p["completed"]:
            self._open(p)["cause"] = _failed_skill(p["skills"])
        elif kind == "EpisodeJudged":
            entry = self._open(p)
            entry["accepted"] = bool(p["accepted"])
            entry["reason"] = str(p.get("reason") or "")
            if not p["accepted"] and p["checks"]:
                entry["cause"] = _failed_checks(p["checks"])
        elif kind in ("TrajectoryCommitted", "TrajectoryDiscarded"):
            key = episode_key(p)
            self._done(key[0], self.open.pop(key, None) or {"accepted": False,
                                                             "reason": "not judged",
                                                             "cause": None})

    def _open(self, payload: Any) -> dict[str, Any]:
        return self.open.setdefault(
            episode_key(payload), {"accepted": False, "reason": "not judged", "cause": None}
        )

    def _done(self, batch_index: int, outcome: dict[str, Any]) -> None:
        reason = None
        if not outcome["accepted"]:
            reason = outcome["reason"] or "rejected"
            if outcome["cause"]:
                reason = f"{reason}: {outcome['cause']}"
        for role, (asset_id, sha) in sorted(self.batches.get(batch_index, {}).items()):
            entry = self.assets.setdefault(
                _asset_key(asset_id, sha, role),
                {"asset_id": asset_id, "content_sha256": sha, "role": role,
                 "attempted": 0, "accepted": 0, "rejections": {}},
            )
            entry["attempted"] += 1
            if reason is None:
                entry["accepted"] += 1
            else:
                entry["rejections"][reason] = entry["rejections"].get(reason, 0) + 1

    def _dump(self) -> Any:
        return {
            "batches": {str(b): roles for b, roles in self.batches.items()},
            "open": [[b, e, o] for (b, e), o in self.open.items()],
            "assets": [self.assets[k] for k in sorted(self.assets)],
        }

    def _restore(self, state: Any) -> None:
        self.batches = {int(b): dict(roles) for b, roles in state["batches"].items()}
        self.open = {(int(b), int(e)): dict(o) for b, e, o in state["open"]}
        self.assets = {
            _asset_key(a["asset_id"], a["content_sha256"], a["role"]): dict(a)
            for a in state["assets"]
        }

    def report(self) -> list[dict[str, Any]]:
        """One row per (asset, role), sorted; rejection reasons most frequent first."""
        rows = []
        for key in sorted(self.assets):
            entry = dict(self.assets[key])
            entry["rejections"] = dict(
                sorted(entry["rejections"].items(), key=lambda item: (-item[1], item[0]))
            )
            rows.append(entry)
        return rows


def asset_outcomes(events: Any) -> list[dict[str, Any]]:
    """The per-asset episode results of one run's log (events in seq order)."""
    projector = AssetOutcomes()
    for event in events:
        projector.apply(event)
    return projector.report()
