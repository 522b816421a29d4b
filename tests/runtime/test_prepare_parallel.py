"""Preparing candidates on a process pool logs exactly what a serial preparation logs, in the
same order, and every snapshot it claims is complete on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from domain.config import CollectionConfig
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.providers import DirectoryAssetProvider
from runtime.assets.snapshot import read_snapshot, verify_prepared_asset
from runtime.deployment import validate_deployment
from runtime.preparation.parallel import WORKERS_ENV, MaterializerPool, worker_count
from runtime.prepare import prepare
from store import InMemoryEventStore

DEMO_TASK = Path(__file__).resolve().parents[2] / "runtime" / "demo" / "task.yaml"
VOLATILE = ("session_id", "host", "pid", "run_id", "task_path", "output_dir")


def _facts(store: Any, run_id: str, output: Path) -> list[tuple[str, dict]]:
    """Every event with what differs between two runs by construction taken out (ids,
    process identity, the output folder's own path)."""
    facts = []
    for event in store.read(run_id):
        payload = {k: v for k, v in event.payload.items() if k not in VOLATILE}
        for key in ("snapshot_dir", "deployment_path"):
            if key in payload:
                payload[key] = str(Path(payload[key]).relative_to(output))
        facts.append((event.type, payload))
    return facts


def _prepare(tmp_path: Path, catalog: Path, name: str, workers: str,
             monkeypatch: pytest.MonkeyPatch) -> tuple[list, Path, Any]:
    monkeypatch.setenv(WORKERS_ENV, workers)
    store = InMemoryEventStore()
    provider = DirectoryAssetProvider(catalog)
    output = tmp_path / name
    result = prepare(
        DEMO_TASK, {"item": provider, "bin": provider}, cfg=CollectionConfig(max_batches=3),
        output_dir=output, store=store,
    )
    return _facts(store, result.run_id, output), output, result


def test_pool_and_serial_log_the_same_facts_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = tmp_path / "catalog"
    write_demo_catalog(catalog)
    serial, _, serial_result = _prepare(tmp_path, catalog, "serial", "1", monkeypatch)
    pooled, output, pooled_result = _prepare(tmp_path, catalog, "pooled", "2", monkeypatch)
    assert pooled == serial
    prepared = [p for t, p in pooled if t == "CandidatePrepared"]
    assert len(prepared) > 10
    for payload in prepared:  # every claimed snapshot is whole and verifies
        verify_prepared_asset(read_snapshot(output / payload["snapshot_dir"]))
    assert [d.manifest_sha256 for d in pooled_result.deployments] == [
        d.manifest_sha256 for d in serial_result.deployments
    ]
    for deployment in pooled_result.deployments:
        validate_deployment(deployment.path, expected_manifest_sha256=deployment.manifest_sha256)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_failing_materialization_is_a_rejection_in_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    monkeypatch.setenv(WORKERS_ENV, workers)
    catalog = tmp_path / "catalog"
    write_demo_catalog(catalog)
    provider = DirectoryAssetProvider(catalog)
    from domain.assets import AssetQuery, PreparationContext

    candidates = list(provider.candidates(AssetQuery(None, {}, ()), 100))[:4]
    broken = candidates[1].__class__(
        candidates[1].candidate_id, str(tmp_path / "nowhere"), candidates[1].descriptor
    )
    with MaterializerPool() as pool:
        chunks = list(pool.materialize(
            provider, [candidates[0], broken, *candidates[2:]],
            PreparationContext(str(tmp_path / "cache")),
        ))
    outcomes = [o for chunk in chunks for o in chunk]
    assert [type(o).__name__ for o in outcomes] == [
        "PreparedAsset", "tuple", "PreparedAsset", "PreparedAsset"
    ]
    assert outcomes[1][0] == "AssetValidationError"


def test_worker_count_honours_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert worker_count(3) == 1  # too few to pay for starting workers
    monkeypatch.setenv(WORKERS_ENV, "4")
    assert worker_count(3) == 3
    monkeypatch.setenv(WORKERS_ENV, "x")
    with pytest.raises(ValueError, match=f"\\${WORKERS_ENV}: not an integer: 'x'"):
        worker_count(3)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*"))
            if f.is_file()}


def test_one_worker_on_a_big_catalog_stages_in_process_with_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batched durability without a pool: the published cache is byte for byte the cache the
    fsync-per-file path writes, and nothing staged is left behind."""
    import runtime.preparation.parallel as parallel
    from domain.assets import AssetQuery, PreparationContext
    from runtime.preparation.parallel import materialize_outcome

    catalog = tmp_path / "catalog"
    write_demo_catalog(catalog)
    provider = DirectoryAssetProvider(catalog)
    candidates = list(provider.candidates(AssetQuery(None, {}, ()), 100))
    plain = PreparationContext(str(tmp_path / "plain"))
    expected = [materialize_outcome(provider, c, plain) for c in candidates]
    monkeypatch.setenv(WORKERS_ENV, "1")
    monkeypatch.setattr(parallel, "MIN_PARALLEL", 2)
    monkeypatch.setattr(parallel, "SYNC_CHUNK", 5)
    published: list[int] = []
    real = parallel._publish_chunk
    monkeypatch.setattr(parallel, "_publish_chunk",
                        lambda chunk, context: published.append(len(chunk)) or real(chunk, context))
    with MaterializerPool() as pool:
        chunks = list(pool.materialize(provider, candidates, PreparationContext(
            str(tmp_path / "staged"))))
    outcomes = [o for chunk in chunks for o in chunk]
    assert published and max(published) == 5 and sum(published) == len(candidates)
    assert [o.content_sha256 for o in outcomes] == [o.content_sha256 for o in expected]
    assert not [p for p in (tmp_path / "staged").iterdir() if p.name.startswith(".tmp-")]
    for asset in expected:
        sha = asset.content_sha256
        assert _tree(tmp_path / "staged" / sha) == _tree(tmp_path / "plain" / sha)


def test_while_a_worker_holds_the_next_job_this_process_takes_the_ones_nobody_started() -> None:
    """Results stay in order whoever computes them; jobs no worker started are cancelled in
    the pool and run here (so a pool still spawning its workers costs no idle time)."""
    import threading
    from concurrent.futures import Future

    from runtime.preparation.parallel import _in_order

    futures: list[Future] = [Future() for _ in range(6)]
    futures[0].set_running_or_notify_cancel()  # a worker has job 0
    futures[3].set_running_or_notify_cancel()  # and job 3
    ran_here: list[int] = []

    def run_here(index: int) -> tuple[str, list[str]]:
        ran_here.append(index)
        if index == 5:  # the worker finishes its jobs while this process works
            threading.Timer(0.05, futures[0].set_result, [("worker 0", [])]).start()
            threading.Timer(0.05, futures[3].set_result, [("worker 3", [])]).start()
        return f"here {index}", []

    results = [outcome for outcome, _staged in _in_order(futures, run_here)]
    assert results == ["worker 0", "here 1", "here 2", "worker 3", "here 4", "here 5"]
    assert sorted(ran_here) == [1, 2, 4, 5]
    assert all(futures[i].cancelled() for i in (1, 2, 4, 5))


def test_a_chunk_of_candidate_facts_is_one_append_after_its_snapshots_are_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batched preparation commits each published chunk's facts in one transaction (not one
    per candidate), in the serial order, and only after the chunk's snapshots are on disk."""
    import runtime.preparation.parallel as parallel

    catalog = tmp_path / "catalog"
    write_demo_catalog(catalog)
    serial, _, _ = _prepare(tmp_path, catalog, "serial", "1", monkeypatch)
    monkeypatch.setattr(parallel, "MIN_PARALLEL", 2)
    monkeypatch.setattr(parallel, "SYNC_CHUNK", 4)
    appends: list[list[str]] = []
    durable: set[str] = set()
    real_append, real_publish = InMemoryEventStore.append, parallel._publish_chunk

    def publish(chunk: list, context: Any) -> list:
        outcomes = real_publish(chunk, context)
        durable.update(str(o.snapshot_dir) for o in outcomes if not isinstance(o, tuple))
        return outcomes

    def append(self: Any, run_id: str, events: Any, **kwargs: Any) -> int:
        appends.append([e.type for e in events])
        for event in events:  # nothing is claimed before it is published (and synced)
            if event.type == "CandidatePrepared":
                assert event.payload["snapshot_dir"] in durable
        return real_append(self, run_id, events, **kwargs)

    monkeypatch.setattr(parallel, "_publish_chunk", publish)
    monkeypatch.setattr(InMemoryEventStore, "append", append)
    batched, _, _ = _prepare(tmp_path, catalog, "batched", "1", monkeypatch)
    assert batched == serial
    candidate_appends = [a for a in appends if "CandidatePrepared" in a]
    sizes = [len(a) for a in candidate_appends]
    assert max(sizes) == 4 and sum(size < 4 for size in sizes) <= 2  # a short last chunk a role
    assert sum(len(a) for a in candidate_appends) == sum(
        t == "CandidatePrepared" for t, _ in serial
    )
