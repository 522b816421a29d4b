"""Shared pieces of the Ray suite: one local Ray instance per session, one demo catalog,
and a reference collection made by the in-process executor (one worker, no Ray)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.loopback_netns import require_loopback_only

require_loopback_only()  # never start Ray on the host's network

SEED, BATCHES, EPISODES = 11, 4, 3
# Every run of the suite uses this id (each in its own database): the run id is part of
# each trajectory's metadata, so only runs sharing it can have byte-identical files.
RUN_ID = "run-20261201-000000-a11a7e"


@pytest.fixture(scope="session")
def ray_local() -> Iterator[str]:
    """A local Ray instance (2 CPUs) shared by the session's tests; its GCS address."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runtime.collection.demo_run import write_catalog

    return write_catalog(tmp_path_factory.mktemp("catalog") / "demo")


def prepared_run(
    base: Path, catalog: Path, *, cameras: bool = False, batches: int = BATCHES,
    episodes: int = EPISODES,
) -> tuple[Any, str, Path]:
    """A prepared demo run (gantry) in ``base``: (store, run id, output dir)."""
    from runtime.collection.demo_run import prepare_demo_run
    from store.event_store import EventStore

    base.mkdir(parents=True, exist_ok=True)
    store = EventStore(f"sqlite:///{base / 'ledger.db'}")
    out = base / "out"
    run_id = prepare_demo_run(
        store, out, catalog, seed=SEED, batches=batches, episodes_per_batch=episodes,
        settle_steps=10, cameras=cameras, run_id=RUN_ID,
    )
    return store, run_id, out


def results(store: Any, run_id: str) -> dict[tuple[int, int], tuple[bool, tuple[str, ...]]]:
    """(batch, episode) -> (accepted, SHA-256 of the trajectory then each camera file)."""
    found: dict[tuple[int, int], tuple[bool, tuple[str, ...]]] = {}
    for event in store.read(run_id):
        p = event.payload
        if event.type == "TrajectoryCommitted":
            key = (p["batch_index"], p["episode_index"])
            assert key not in found, f"{key} committed twice"
            files = tuple(f["sha256"] for f in p.get("files", ()))
            found[key] = (True, (p["sha256"], *files))
        elif event.type == "TrajectoryDiscarded":
            key = (p["batch_index"], p["episode_index"])
            assert key not in found, f"{key} discarded twice"
            found[key] = (False, ())
    return found


def assert_logged_once_and_legal(store: Any, run_id: str, out: Path) -> None:
    """Every episode started once, the log folds legally and verifies (files included)."""
    from runtime.verify import verify_events

    events = store.read(run_id)
    starts: dict[tuple[int, int], int] = {}
    for event in events:
        if event.type == "EpisodeStarted":
            key = (event.payload["batch_index"], event.payload["episode_index"])
            starts[key] = starts.get(key, 0) + 1
    assert starts and set(starts.values()) == {1}, starts
    assert store.state(run_id).state == "completed"
    verdict = verify_events(run_id, events)
    assert not verdict.problems, verdict.problems


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, catalog: Path) -> dict:
    """The same task and seed collected in process by one worker (no Ray)."""
    from runtime.collection import collect

    store, run_id, _out = prepared_run(tmp_path_factory.mktemp("reference"), catalog)
    collect(run_id, store=store, progress=False)
    found = results(store, run_id)
    assert len(found) == BATCHES * EPISODES and any(a for a, _ in found.values())
    return found


def workers_of(store: Any, run_id: str) -> set[str]:
    return {
        e.payload["worker"] for e in store.read(run_id)
        if e.type == "BatchStarted" and "worker" in e.payload
    }
