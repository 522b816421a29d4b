"""Preparation end to end on the demo catalog: the ledger, the report and the deployments."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from domain.assets import AssetCandidate, AssetQuery, PreparationContext, PreparedAsset
from domain.config import CollectionConfig
from domain.errors import AssetcastInputError, LeaseHeld
from domain.matching import MatchingError
from runtime.assets.demo_catalog import write_demo_catalog
from runtime.assets.providers import DirectoryAssetProvider, ExplicitAssetProvider
from runtime.deployment import validate_deployment
from runtime.files import report_text
from runtime.prepare import (
    PreparationFailed,
    ProviderContractError,
    prepare,
    providers_from_catalog_args,
    resume_preparation,
)
from store import EventStore, InMemoryEventStore, NewEvent
from store.projections.preparation_report import preparation_report

DEMO_TASK = Path(__file__).resolve().parents[2] / "runtime" / "demo" / "task.yaml"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("catalog")
    write_demo_catalog(root)
    return root


@pytest.fixture(scope="module")
def package_count(catalog: Path) -> int:
    return len(DirectoryAssetProvider(catalog).package_dirs())


def providers(catalog: Path, **overrides: Any) -> dict[str, Any]:
    found = {"item": DirectoryAssetProvider(catalog), "bin": DirectoryAssetProvider(catalog)}
    found.update(overrides)
    return found


def types(store: Any, run_id: str) -> list[str]:
    return [event.type for event in store.read(run_id)]


def only_run(store: Any) -> str:
    (summary,) = store.list_runs()
    return summary.run_id


class Wrapped:
    """A real provider with listing or materializing replaced by a misbehaving function."""

    def __init__(
        self,
        inner: Any,
        *,
        listing: Callable[[AssetQuery, int], Iterable[Any]] | None = None,
        materialize: Callable[[AssetCandidate, PreparationContext], Any] | None = None,
    ) -> None:
        self.inner, self.listing, self.materializer = inner, listing, materialize

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def candidates(self, query: AssetQuery, limit: int) -> Iterable[Any]:
        if self.listing is not None:
            return self.listing(query, limit)
        return self.inner.candidates(query, limit)

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> Any:
        if self.materializer is not None:
            return self.materializer(candidate, context)
        return self.inner.materialize(candidate, context)


# ------------------------------------------------------------------ the happy path


def test_demo_preparation_events_report_and_deployments(
    catalog: Path, package_count: int, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    store = EventStore(url)
    out = tmp_path / "out"
    result = prepare(
        DEMO_TASK, providers(catalog), cfg=CollectionConfig(seed=7, max_batches=2),
        output_dir=out, store=store,
    )
    per_role = ["CandidatesListed"] + ["CandidatePrepared"] * package_count
    assert types(store, result.run_id) == [
        "RunCreated", "PreparationStarted", *per_role, *per_role,
        "BatchResolved", "DeploymentMaterialized", "BatchResolved", "DeploymentMaterialized",
        "PreparationCompleted",
    ]
    assert store.state(result.run_id).state == "prepared"
    events = store.read(result.run_id)
    created = events[0].payload
    assert created["output_dir"] == str(out.resolve())
    assert created["goal"] == "prepare"
    assert created["providers"] == {
        "bin": {"kind": "directory", "root": str(catalog)},
        "item": {"kind": "directory", "root": str(catalog)},
    }
    listed = [e.payload for e in events if e.type == "CandidatesListed"]
    assert [p["role"] for p in listed] == ["bin", "item"]  # roles in sorted order
    # The demo task declares aliases: listing is category-free, matching enforces them.
    assert all(p["query"]["category"] is None for p in listed)

    # Batch i uses seed cfg.seed + i, and every deployment is sealed and valid.
    resolved = [e.payload for e in events if e.type == "BatchResolved"]
    assert [p["seed"] for p in resolved] == [7, 8]
    materialized = [e.payload for e in events if e.type == "DeploymentMaterialized"]
    assert len(result.deployments) == 2
    for deployment, logged in zip(result.deployments, materialized, strict=True):
        checked = validate_deployment(
            deployment.path, expected_manifest_sha256=logged["manifest_sha256"]
        )
        assert checked.asset_set_id == logged["asset_set_id"] == deployment.asset_set_id
        assert deployment.path == out / f"batch_{deployment.batch_index:04d}"

    # The report on disk is the projection of the log, regenerated from a fresh store.
    fresh = EventStore(url)
    regenerated = report_text(preparation_report(fresh.read(result.run_id)))
    assert result.report_path.read_text(encoding="utf-8") == regenerated
    report = json.loads(regenerated)
    assert report["status"] == "prepared"
    assert report["roles"]["item"] == {"prepared": package_count, "rejections": []}
    assert [b["asset_set_id"] for b in report["batches"]] == [
        d.asset_set_id for d in result.deployments
    ]


def test_task_without_aliases_lists_with_the_role_category(
    catalog: Path, tmp_path: Path
) -> None:
    text = DEMO_TASK.read_text(encoding="utf-8").replace("  category_aliases: {cube: block}\n", "")
    task = tmp_path / "task.yaml"
    task.write_text(text, encoding="utf-8")
    store = InMemoryEventStore()
    result = prepare(
        task, providers(catalog), cfg=CollectionConfig(), output_dir=tmp_path / "o", store=store
    )
    queries = {
        e.payload["role"]: e.payload["query"]["category"]
        for e in store.read(result.run_id) if e.type == "CandidatesListed"
    }
    assert queries == {"bin": "bin", "item": "block"}


def test_same_seed_same_deployments_across_runs(catalog: Path, tmp_path: Path) -> None:
    cfg = CollectionConfig(seed=3, max_batches=2)
    store = InMemoryEventStore()
    first = prepare(DEMO_TASK, providers(catalog), cfg=cfg, output_dir=tmp_path / "a", store=store)
    second = prepare(DEMO_TASK, providers(catalog), cfg=cfg, output_dir=tmp_path / "b", store=store)
    assert [d.asset_set_id for d in first.deployments] == [
        d.asset_set_id for d in second.deployments
    ]
    for a, b in zip(first.deployments, second.deployments, strict=True):
        assert (a.path / "manifest.json").read_bytes() == (b.path / "manifest.json").read_bytes()


# ------------------------------------------------------------------ misbehaving providers


def test_listing_failures_are_recorded_not_raised(catalog: Path, tmp_path: Path) -> None:
    inner = DirectoryAssetProvider(catalog)

    def offline(query: AssetQuery, limit: int) -> Iterable[Any]:
        raise ConnectionError("catalog offline")

    def endless(query: AssetQuery, limit: int) -> Iterable[Any]:
        first = inner.candidates(query, 1)[0]
        return itertools.repeat(first)  # never ends: only limit + 1 items may be pulled

    def junk(query: AssetQuery, limit: int) -> Iterable[Any]:
        return ["not-a-candidate"]

    for listing, error_type, detail in (
        (offline, "ConnectionError", "catalog offline"),
        (endless, "ProviderMisbehaved", "provider returned more than the requested limit of 4"),
        (junk, "ProviderMisbehaved", "item 0 is a str, not an AssetCandidate"),
    ):
        store = InMemoryEventStore()
        out = tmp_path / f"{error_type}-{len(detail)}"
        with pytest.raises(PreparationFailed) as info:
            prepare(
                DEMO_TASK, providers(catalog, item=Wrapped(inner, listing=listing)),
                cfg=CollectionConfig(candidates_per_role=4), output_dir=out, store=store,
            )
        assert isinstance(info.value.__cause__, MatchingError)
        run_id = only_run(store)
        failed = [e.payload for e in store.read(run_id) if e.type == "CandidateListingFailed"]
        assert failed == [{"role": "item", "error_type": error_type, "detail": detail}]
        report = json.loads((out / "preparation.report.json").read_text())
        assert report["roles"]["item"]["rejections"] == [
            {"stage": "candidates", "error_type": error_type, "detail": detail}
        ]
        assert report["roles"]["bin"]["prepared"] == 4


def test_materialize_failures_reject_the_candidate_only(catalog: Path, tmp_path: Path) -> None:
    inner = DirectoryAssetProvider(catalog)

    def flaky(candidate: AssetCandidate, context: PreparationContext) -> Any:
        if candidate.candidate_id.startswith("bottle"):
            raise OSError(f"cannot read {candidate.candidate_id}")
        if candidate.candidate_id.startswith("cup"):
            return {"not": "prepared"}
        return inner.materialize(candidate, context)

    store = InMemoryEventStore()
    result = prepare(
        DEMO_TASK, providers(catalog, item=Wrapped(inner, materialize=flaky)),
        cfg=CollectionConfig(), output_dir=tmp_path / "o", store=store,
    )
    assert store.state(result.run_id).state == "prepared"
    rejected = [e.payload for e in store.read(result.run_id) if e.type == "CandidateRejected"]
    assert {p["candidate_id"] for p in rejected} == {
        "bottle-mouth-r010", "bottle-mouth-r015", "bottle-mouth-r025",
        "cup-r020", "cup-r035", "cup-r050",
    }
    assert {(p["stage"], p["error_type"]) for p in rejected} == {
        ("materialize", "OSError"), ("materialize", "ProviderMisbehaved"),
    }
    report = json.loads(result.report_path.read_text())
    assert len(report["roles"]["item"]["rejections"]) == 6
    assert report["roles"]["item"]["prepared"] == report["roles"]["bin"]["prepared"] - 6


def test_role_without_eligible_asset_fails_with_structured_rejections(
    catalog: Path, tmp_path: Path
) -> None:
    bins_only = ExplicitAssetProvider([catalog / "bin-080x080", catalog / "bin-120x100"])
    store = InMemoryEventStore()
    out = tmp_path / "o"
    with pytest.raises(PreparationFailed, match="batch 0 \\(seed 0\\)") as info:
        prepare(
            DEMO_TASK, providers(catalog, item=bins_only), cfg=CollectionConfig(),
            output_dir=out, store=store,
        )
    cause = info.value.__cause__
    assert isinstance(cause, MatchingError)
    run_id = only_run(store)
    state = store.state(run_id)
    assert (state.state, state.failed_from) == ("failed", "preparing")
    assert types(store, run_id)[-2:] == ["BatchUnresolvable", "RunFailed"]
    events = store.read(run_id)
    unresolvable = events[-2].payload
    assert unresolvable["rejections"] == [r.to_dict() for r in cause.rejections]
    item_codes = {r["code"] for r in unresolvable["rejections"] if r["role"] == "item"}
    assert {"category_mismatch", "no_candidates"} <= item_codes
    assert events[-1].payload["error_type"] == "MatchingError"
    text = (out / "preparation.report.json").read_text()
    assert text == report_text(preparation_report(events))
    report = json.loads(text)
    assert report["status"] == "failed"
    assert report["error_type"] == "MatchingError"
    assert report["matching_rejections"] == unresolvable["rejections"]


# ------------------------------------------------------------------ bad input


def test_non_empty_output_dir_is_refused_before_any_event(catalog: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    store = InMemoryEventStore()
    with pytest.raises(AssetcastInputError, match=f"^output directory is not empty: {out}$"):
        prepare(DEMO_TASK, providers(catalog), cfg=CollectionConfig(), output_dir=out, store=store)
    assert store.list_runs() == []
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"item"}, r"providers must cover exactly the task's roles \['bin', 'item'\]: "
                   r"missing \['bin'\]$"),
        ({"item", "bin", "lid"}, r"extra \['lid'\]$"),
        ({"item", "lid"}, r"missing \['bin'\]; extra \['lid'\]$"),
    ],
)
def test_providers_must_cover_exactly_the_roles(
    catalog: Path, tmp_path: Path, given: set[str], message: str
) -> None:
    store = InMemoryEventStore()
    chosen = {role: DirectoryAssetProvider(catalog) for role in given}
    out = tmp_path / "out"
    with pytest.raises(AssetcastInputError, match=message):
        prepare(DEMO_TASK, chosen, cfg=CollectionConfig(), output_dir=out, store=store)
    assert store.list_runs() == []
    assert not out.exists()


def test_provider_must_implement_the_protocol(catalog: Path, tmp_path: Path) -> None:
    store = InMemoryEventStore()
    with pytest.raises(ProviderContractError, match="provider for role 'bin' does not implement"):
        prepare(
            DEMO_TASK, providers(catalog, bin=object()), cfg=CollectionConfig(),
            output_dir=tmp_path / "o", store=store,
        )
    assert store.list_runs() == []


def test_catalog_arguments(catalog: Path, tmp_path: Path) -> None:
    built = providers_from_catalog_args([f"item={catalog}", f"bin={catalog}"])
    assert sorted(built) == ["bin", "item"]
    assert built["item"].describe() == {"kind": "directory", "root": str(catalog)}
    for argument, message in (
        ("item", "expected ROLE=DIR"),
        ("=dir", "expected ROLE=DIR"),
        (f"item={tmp_path / 'nope'}", f"{tmp_path / 'nope'} is not a directory$"),
    ):
        with pytest.raises(AssetcastInputError, match=f"^--catalog '{argument}': {message}"):
            providers_from_catalog_args([argument])
    # A role may name several catalogs (merged); the same folder twice counts once.
    same = providers_from_catalog_args([f"item={catalog}", f"item={catalog}/"])
    assert same["item"].describe() == {"kind": "directory", "root": str(catalog)}
    other = tmp_path / "other"
    other.mkdir()
    merged = providers_from_catalog_args([f"item={catalog}", f"item={other}", f"bin={catalog}"])
    assert merged["item"].describe() == {
        "kind": "directories", "roots": [str(catalog), str(other)]
    }
    assert merged["bin"].describe() == {"kind": "directory", "root": str(catalog)}


# ------------------------------------------------------------------ failures and resume


class Crash(BaseException):
    """Stands in for an interruption the preparation cannot survive."""


def test_unexpected_error_is_logged_reraised_with_identity_and_resumable(
    catalog: Path, tmp_path: Path
) -> None:
    inner = DirectoryAssetProvider(catalog)
    raised = Crash("power cut")
    out = tmp_path / "out"

    def dies(candidate: AssetCandidate, context: PreparationContext) -> PreparedAsset:
        if candidate.candidate_id == "block-040":
            (out / "preparation.report.json").mkdir()  # the report write will fail too
            raise raised
        return inner.materialize(candidate, context)

    store = InMemoryEventStore()
    cfg = CollectionConfig(max_batches=2)
    with pytest.raises(Crash) as info:
        prepare(
            DEMO_TASK, providers(catalog, item=Wrapped(inner, materialize=dies)), cfg=cfg,
            output_dir=out, store=store,
        )
    assert info.value is raised
    assert any("writing preparation.report.json failed" in note for note in raised.__notes__)
    run_id = only_run(store)
    failure = store.read(run_id)[-1]
    assert failure.type == "RunFailed"
    assert (failure.payload["phase"], failure.payload["error_type"]) == ("preparing", "Crash")
    assert "power cut" in failure.payload["traceback"]

    (out / "preparation.report.json").rmdir()
    resumed = resume_preparation(run_id, store=store)  # providers rebuilt from RunCreated
    baseline = prepare(
        DEMO_TASK, providers(catalog), cfg=cfg, output_dir=tmp_path / "base", store=store
    )
    assert [d.asset_set_id for d in resumed.deployments] == [
        d.asset_set_id for d in baseline.deployments
    ]
    for a, b in zip(resumed.deployments, baseline.deployments, strict=True):
        assert (a.path / "manifest.json").read_bytes() == (b.path / "manifest.json").read_bytes()
    log = types(store, run_id)
    assert log.count("CandidatesListed") == 2  # the logged listing is reused, not repeated
    assert log.count("RunResumed") == 1
    prepared_ids = [
        (e.payload["role"], e.payload["candidate_id"])
        for e in store.read(run_id) if e.type == "CandidatePrepared"
    ]
    assert len(prepared_ids) == len(set(prepared_ids))
    assert store.state(run_id).state == "prepared"
    assert resumed.report_path.read_text() == report_text(preparation_report(store.read(run_id)))
    assert json.loads(resumed.report_path.read_text())["status"] == "prepared"


def test_resume_refuses_a_prepared_run(catalog: Path, tmp_path: Path) -> None:
    store = InMemoryEventStore()
    result = prepare(
        DEMO_TASK, providers(catalog), cfg=CollectionConfig(), output_dir=tmp_path / "o",
        store=store,
    )
    with pytest.raises(AssetcastInputError, match=f"run {result.run_id} is 'prepared'"):
        resume_preparation(result.run_id, store=store)


def test_resume_redoes_a_deleted_deployment_without_new_facts(
    catalog: Path, tmp_path: Path
) -> None:
    store = InMemoryEventStore()
    out = tmp_path / "o"
    result = prepare(
        DEMO_TASK, providers(catalog), cfg=CollectionConfig(), output_dir=out, store=store
    )
    # A copy of the log that stops just before PreparationCompleted: a run killed there.
    copy = InMemoryEventStore()
    # Its session ran in a process that is gone now (a finished child's pid).
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead_pid = int(child.stdout)
    events = [
        NewEvent(e.type, {**e.payload, "pid": dead_pid} if e.type == "PreparationStarted"
                 else e.payload)
        for e in store.read(result.run_id)
    ]
    dead_session = events[1].payload["session_id"]
    created = NewEvent("RunCreated", {**events[0].payload, "run_id": "run-copy"})
    copy.append("run-copy", [created], expected_version=0)
    copy.append("run-copy", events[1:-1], expected_version=1)
    manifest_before = (out / "batch_0000" / "manifest.json").read_bytes()
    shutil.rmtree(out / "batch_0000")
    dead = out / f".batch_0000.partial-{dead_session}.1-dead"
    unknown = out / ".batch_0000.partial-0123456789ab.7-alive"  # nobody the log knows
    dead.mkdir()
    unknown.mkdir()

    resumed = resume_preparation("run-copy", store=copy)
    assert (out / "batch_0000" / "manifest.json").read_bytes() == manifest_before
    assert not dead.exists()
    assert unknown.is_dir()  # could be a stalled writer's: never deleted
    # The logged DeploymentMaterialized still holds (same manifest digest): no new fact.
    assert types(copy, "run-copy")[-2:] == ["RunResumed", "PreparationCompleted"]
    assert resumed.deployments[0].asset_set_id == result.deployments[0].asset_set_id


def test_lease_is_held_while_preparing(catalog: Path, tmp_path: Path) -> None:
    inner = DirectoryAssetProvider(catalog)
    store = InMemoryEventStore()
    seen: list[str] = []

    def intruder(candidate: AssetCandidate, context: PreparationContext) -> Any:
        if not seen:
            with pytest.raises(LeaseHeld) as info:
                store.acquire_lease(only_run(store), owner="intruder")
            seen.append(str(info.value))
        return inner.materialize(candidate, context)

    prepare(
        DEMO_TASK, providers(catalog, item=Wrapped(inner, materialize=intruder)),
        cfg=CollectionConfig(), output_dir=tmp_path / "o", store=store,
    )
    assert seen and "is held by" in seen[0]
    # Released at the end: another session can take it now.
    store.acquire_lease(only_run(store), owner="next").release()


def test_resume_rejects_a_snapshot_tampered_after_it_was_logged(
    catalog: Path, package_count: int, tmp_path: Path
) -> None:
    store = InMemoryEventStore()
    out = tmp_path / "o"
    result = prepare(
        DEMO_TASK, providers(catalog), cfg=CollectionConfig(), output_dir=out, store=store
    )
    events = [NewEvent(e.type, e.payload) for e in store.read(result.run_id)]
    cut = next(i for i, e in enumerate(events) if e.type == "BatchResolved")
    copy = InMemoryEventStore()  # the run as if killed right after preparing candidates
    copy.append(
        "run-cut", [NewEvent("RunCreated", {**events[0].payload, "run_id": "run-cut"})],
        expected_version=0,
    )
    copy.append("run-cut", events[1:cut], expected_version=1)
    cup = next(
        e.payload for e in events
        if e.type == "CandidatePrepared" and e.payload["candidate_id"] == "cup-r020"
    )
    (Path(cup["snapshot_dir"]) / "asset.catalog.json").write_text("{}")

    resumed = resume_preparation("run-cut", store=copy)
    after = [e.payload for e in copy.read("run-cut")[cut:] if e.type == "CandidateRejected"]
    assert sorted((p["role"], p["candidate_id"]) for p in after) == [
        ("bin", "cup-r020"), ("item", "cup-r020")
    ]
    report = json.loads(resumed.report_path.read_text())
    assert report["roles"]["item"]["prepared"] == package_count - 1  # latest outcome wins
    assert report["roles"]["item"]["rejections"][0]["candidate_id"] == "cup-r020"
    assert copy.state("run-cut").state == "prepared"


class SlowFirstCandidate(DirectoryAssetProvider):
    """One candidate takes several lease TTLs to materialize (like a huge mesh); meanwhile
    another session tries to take the run over."""

    def __init__(self, root: Path, store: Any, hold_s: float) -> None:
        super().__init__(root)
        self.store, self.hold_s, self.refusals = store, hold_s, []

    def materialize(self, candidate: AssetCandidate, context: PreparationContext) -> Any:
        if not self.refusals:
            (summary,) = self.store.list_runs()
            deadline = time.monotonic() + self.hold_s
            while time.monotonic() < deadline:
                time.sleep(0.1)
                with pytest.raises(LeaseHeld) as refused:
                    self.store.acquire_lease(summary.run_id, owner="intruder", ttl_s=30)
                self.refusals.append(str(refused.value))
        return super().materialize(candidate, context)


def test_a_step_longer_than_the_lease_keeps_it_thanks_to_the_heartbeat(
    catalog: Path, tmp_path: Path
) -> None:
    store = EventStore(f"sqlite:///{tmp_path / 'ledger.db'}")
    slow = SlowFirstCandidate(catalog, store, hold_s=2.5)  # 2.5 TTLs
    result = prepare(
        DEMO_TASK, providers(catalog, item=slow), cfg=CollectionConfig(max_batches=1),
        output_dir=tmp_path / "out", store=store, lease_ttl_s=1.0,
    )
    assert len(slow.refusals) >= 5 and all("is held by owner" in r for r in slow.refusals)
    assert "LeaseTakenOver" not in types(store, result.run_id)
    assert store.state(result.run_id).state == "prepared"
