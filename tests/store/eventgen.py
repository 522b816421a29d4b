"""Synthetic, legal event sequences for store tests and benchmarks."""

from __future__ import annotations

from collections.abc import Iterator

from store.records import NewEvent


def created(run_id: str, goal: str = "run") -> NewEvent:
    return NewEvent("RunCreated", {
        "run_id": run_id, "goal": goal, "task_id": "place_item_in_bin",
        "task_path": "task.yaml", "task_sha256": "0" * 64, "config": {"seed": 0},
        "providers": {}, "output_dir": "out", "tool_version": "0.1.0",
    })


def preparation(batches: int = 1) -> list[NewEvent]:
    events = [NewEvent("PreparationStarted", {"session_id": "s-prep", "host": "h", "pid": 1})]
    for b in range(batches):
        events.append(NewEvent("BatchResolved", {
            "batch_index": b, "seed": b, "asset_set_id": f"set{b}", "requirements_digest": "d",
            "assets": {"item": {"asset_id": "a", "content_sha256": "c"}}, "search_nodes": 3,
        }))
        events.append(NewEvent("DeploymentMaterialized", {
            "batch_index": b, "asset_set_id": f"set{b}", "deployment_path": f"batch_{b:04d}",
            "manifest_sha256": "m",
        }))
    events.append(NewEvent("PreparationCompleted", {"batches": batches}))
    return events


def collection_started(session: str = "s1", episodes_per_batch: int = 1) -> NewEvent:
    return NewEvent("CollectionStarted", {
        "session_id": session, "host": "h", "pid": 1, "episodes_per_batch": episodes_per_batch,
        "record_trajectory": True, "recording_dir": None,
    })


def batch_started(b: int) -> NewEvent:
    return NewEvent("BatchStarted", {
        "batch_index": b, "asset_set_id": f"set{b}", "seed": b, "deployment_path": f"batch_{b}",
    })


def episode(b: int, e: int, accepted: bool = True, upto: str | None = None) -> list[NewEvent]:
    """The grammar of one episode; ``upto`` stops after that event type (a crash)."""
    k = {"batch_index": b, "episode_index": e}
    events = [
        NewEvent("EpisodeStarted", {**k, "seed": 1000 * b + e}),
        NewEvent("InitialChecked", {**k, "passed": True, "checks": []}),
        NewEvent("EpisodeExecuted", {
            **k, "completed": True, "steps": 10, "skills": [], "detail": "",
        }),
        NewEvent("EpisodeJudged", {**k, "accepted": accepted, "checks": [], "reason": "ok"}),
        NewEvent("TrajectoryCommitted", {
            **k, "path": f"ep_{b}_{e}.json", "bytes": 10, "sha256": "f" * 64,
        }) if accepted else NewEvent("TrajectoryDiscarded", {**k, "reason": "rejected"}),
        NewEvent("ResetSubmitted", dict(k)),
    ]
    if upto is not None:
        cut = [ev.type for ev in events].index(upto)
        events = events[: cut + 1]
    return events


def legal_run(run_id: str, batches: int, episodes: int) -> Iterator[NewEvent]:
    """A complete run: preparation, collection of every episode, completion."""
    yield created(run_id)
    yield from preparation(batches)
    yield collection_started(episodes_per_batch=episodes)
    yield NewEvent("EnvironmentBuilt", {"session_id": "s1", "batch_index": 0, "constructions": 1})
    for b in range(batches):
        yield batch_started(b)
        for e in range(episodes):
            yield from episode(b, e, accepted=(e % 3 != 0))
        yield NewEvent("BatchFinished", {"batch_index": b, "accepted": 0, "attempted": episodes})
    yield NewEvent("EnvironmentClosed", {
        "session_id": "s1", "ok": True, "error_type": None, "detail": None,
    })
    yield NewEvent("RunCompleted", {
        "batches": batches, "accepted": 0, "attempted": batches * episodes,
    })
