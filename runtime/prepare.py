"""Event-sourced preparation: list and prepare candidates once per role, resolve and
materialize one deployment per batch, and record every step in the run's ledger.

The ledger, not this process, is the memory of a preparation. Every fact is appended before
the next step relies on it, so a preparation killed at any instant can be resumed from its log:
``resume_preparation`` reads what was listed, prepared, resolved and materialized, re-verifies
what is on disk, and redoes only the rest. Because listing order, ranking seeds and deployment
bytes are all deterministic, the resumed run ends with the same deployments (same
``asset_set_id``s, byte-identical manifests) as a run that was never interrupted.

Resume never appends a second ``CandidatesListed``/``CandidateListingFailed`` for a role, nor
a second ``BatchResolved``/``DeploymentMaterialized`` for a batch whose facts still hold: the
logged candidate ids are authoritative, and the provider is asked again only to recover the
candidate objects of ids that were listed but not yet prepared.
"""

from __future__ import annotations

import importlib.metadata
import os
import secrets
import shutil
import socket
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

import structlog

from domain.assets import (
    AssetCandidate,
    AssetProvider,
    AssetQuery,
    PreparationContext,
    PreparedAsset,
)
from domain.canonical import canonical_json, sha256_hex
from domain.config import CollectionConfig
from domain.errors import AssetcastError, AssetcastInputError, UnknownRun
from domain.matching import MatchingError, ResolvedAssetSet, resolve_asset_set
from domain.requirements import AssetRequirements
from domain.task import TaskSpec
from runtime.deployment import (
    Deployment,
    batch_dir_name,
    materialize_deployment,
    remove_temp_dirs,
    validate_deployment,
)
from runtime.files import write_json_atomic
from runtime.taskfile import load_task
from store.projections.preparation_report import preparation_report
from store.records import NewEvent

log = structlog.get_logger(__name__)

REPORT_NAME = "preparation.report.json"
CACHE_NAME = "cache"
LEASE_TTL_S = 30.0
_PHASE = "preparing"


class PreparationFailed(AssetcastError):
    """Matching found no asset set for a batch; ``RunFailed`` is already in the log.

    The structured ``MatchingError`` is the ``__cause__``; the CLI maps this to exit 1.
    """


class ProviderContractError(AssetcastInputError, TypeError):
    """A supplied provider object does not implement ``AssetProvider``."""


class ProviderMisbehaved(AssetcastError):
    """A provider broke its contract while listing (too many items, wrong types, dup ids)."""


class NondeterministicResume(AssetcastError):
    """Re-deriving a logged fact gave a different answer; resuming would corrupt the run."""


@dataclass(frozen=True)
class PreparationResult:
    run_id: str
    deployments: tuple[Deployment, ...]
    report_path: Path


# --------------------------------------------------------------------------- identifiers


def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"run-{stamp}-{secrets.token_hex(3)}"


def new_session_id() -> str:
    return secrets.token_hex(6)


def tool_version() -> str:
    try:
        return importlib.metadata.version("assetcast")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0+source"


# --------------------------------------------------------------------------- input checks


def _check_providers(
    providers_by_role: Mapping[str, Any], requirements: AssetRequirements
) -> None:
    """Exactly one provider per declared role, each implementing the protocol."""
    declared, given = set(requirements.roles), set(providers_by_role)
    if declared != given:
        parts = []
        if declared - given:
            parts.append(f"missing {sorted(declared - given)}")
        if given - declared:
            parts.append(f"extra {sorted(given - declared)}")
        raise AssetcastInputError(
            "providers must cover exactly the task's roles " + f"{sorted(declared)}: "
            + "; ".join(parts)
        )
    for role in sorted(providers_by_role):
        if not isinstance(providers_by_role[role], AssetProvider):
            raise ProviderContractError(
                f"provider for role {role!r} does not implement AssetProvider"
                " (describe, candidates, materialize)"
            )


def _check_output_dir(output_dir: str | Path) -> Path:
    output = Path(output_dir).resolve()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise AssetcastInputError(f"output directory is not empty: {output}")
    return output


def _requirements_of(spec: TaskSpec, task_path: Path) -> AssetRequirements:
    if spec.asset_requirements is None:
        raise AssetcastInputError(f"{task_path}: asset_requirements: the task declares no roles")
    return spec.asset_requirements


def _describe(providers_by_role: Mapping[str, AssetProvider]) -> dict[str, Any]:
    descriptions: dict[str, Any] = {}
    for role in sorted(providers_by_role):
        description = providers_by_role[role].describe()
        try:
            canonical_json(description)
        except (TypeError, ValueError) as error:
            raise ProviderContractError(
                f"provider for role {role!r}: describe() is not JSON ({error})"
            ) from error
        if not isinstance(description, dict):
            raise ProviderContractError(f"provider for role {role!r}: describe() is not a dict")
        descriptions[role] = description
    return descriptions


def providers_from_catalog_args(arguments: Sequence[str]) -> dict[str, AssetProvider]:
    """Turn ``--catalog ROLE=DIR`` arguments into catalog-folder providers (never online)."""
    from runtime.assets.providers import DirectoryAssetProvider

    providers: dict[str, AssetProvider] = {}
    for argument in arguments:
        role, sep, directory = argument.partition("=")
        role, directory = role.strip(), directory.strip()
        if not sep or not role or not directory:
            raise AssetcastInputError(f"--catalog {argument!r}: expected ROLE=DIR")
        if role in providers:
            raise AssetcastInputError(f"--catalog {argument!r}: role {role!r} given twice")
        if not Path(directory).is_dir():
            raise AssetcastInputError(f"--catalog {argument!r}: {directory} is not a directory")
        providers[role] = DirectoryAssetProvider(Path(directory).resolve())
    return providers


# --------------------------------------------------------------------------- the ledger


class _Ledger:
    """Appends this session's events with optimistic concurrency and keeps the lease alive."""

    def __init__(self, store: Any, run_id: str, version: int, lease: Any | None) -> None:
        self.store = store
        self.run_id = run_id
        self.version = version
        self.lease = lease
        self._last_beat = time.monotonic()

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        self.version = self.store.append(
            self.run_id, [NewEvent(event_type, payload)], expected_version=self.version
        )
        self.heartbeat()

    def heartbeat(self) -> None:
        """Renew the lease, at most every quarter TTL (a renewal is a store write)."""
        if self.lease is None:
            return
        now = time.monotonic()
        if now - self._last_beat >= self.lease.ttl_s / 4:
            self.lease.heartbeat()
            self._last_beat = now

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()
            self.lease = None


def _session_payload(session_id: str) -> dict[str, Any]:
    return {"session_id": session_id, "host": socket.gethostname(), "pid": os.getpid()}


# --------------------------------------------------------------------------- progress


@dataclass
class _Progress:
    """What the log already holds; empty for a fresh run. Latest outcome per candidate wins."""

    listed: dict[str, list[str]] = field(default_factory=dict)
    listing_failed: set[str] = field(default_factory=set)
    outcomes: dict[str, dict[str, tuple[str, dict[str, Any]]]] = field(default_factory=dict)
    resolved: dict[int, dict[str, Any]] = field(default_factory=dict)
    materialized: dict[int, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_events(cls, events: Iterable[Any]) -> _Progress:
        progress = cls()
        for event in events:
            kind, payload = event.type, event.payload
            if kind == "CandidatesListed":
                progress.listed[payload["role"]] = list(payload["candidate_ids"])
            elif kind == "CandidateListingFailed":
                progress.listing_failed.add(payload["role"])
            elif kind in ("CandidatePrepared", "CandidateRejected"):
                if payload.get("candidate_id") is not None:
                    outcome = "prepared" if kind == "CandidatePrepared" else "rejected"
                    progress.outcomes.setdefault(payload["role"], {})[payload["candidate_id"]] = (
                        outcome,
                        payload,
                    )
            elif kind == "BatchResolved":
                progress.resolved[payload["batch_index"]] = payload
            elif kind == "DeploymentMaterialized":
                progress.materialized[payload["batch_index"]] = payload
        return progress


# --------------------------------------------------------------------------- candidates


def listing_query(requirements: AssetRequirements, role: str) -> AssetQuery:
    """Providers do not know task-owned aliases: with aliases, list every category and let
    the matcher enforce the category exactly."""
    query = requirements.roles[role].query
    if requirements.category_aliases:
        return AssetQuery(None, query.attributes, query.capabilities)
    return query


def list_candidates(provider: AssetProvider, query: AssetQuery, limit: int) -> list[AssetCandidate]:
    """At most ``limit`` distinct candidates, or an error describing the contract breach.

    Only ``limit + 1`` items are ever pulled, so an endless provider cannot stall preparation.
    """
    items = list(islice(iter(provider.candidates(query, limit)), limit + 1))
    if len(items) > limit:
        raise ProviderMisbehaved(f"provider returned more than the requested limit of {limit}")
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, AssetCandidate):
            raise ProviderMisbehaved(
                f"item {index} is a {type(item).__name__}, not an AssetCandidate"
            )
        if not isinstance(item.candidate_id, str) or not item.candidate_id:
            raise ProviderMisbehaved(f"item {index} has no candidate_id string")
        if item.candidate_id in seen:
            raise ProviderMisbehaved(f"candidate id {item.candidate_id!r} listed twice")
        seen.add(item.candidate_id)
    return items


def _materialize(
    provider: AssetProvider, candidate: AssetCandidate, context: PreparationContext
) -> PreparedAsset:
    prepared = provider.materialize(candidate, context)
    if not isinstance(prepared, PreparedAsset):
        raise ProviderMisbehaved(
            f"materialize returned a {type(prepared).__name__}, not a PreparedAsset"
        )
    return prepared


def _reuse_snapshot(payload: dict[str, Any]) -> PreparedAsset | None:
    """The logged snapshot if it still verifies byte for byte, else ``None`` (redo it)."""
    from runtime.assets.snapshot import read_snapshot, verify_prepared_asset

    try:
        asset = read_snapshot(Path(payload["snapshot_dir"]))
        verify_prepared_asset(asset)
    except (AssetcastError, OSError, ValueError) as error:
        log.warning("prepare.snapshot_unusable", snapshot=payload["snapshot_dir"], error=str(error))
        return None
    if asset.content_sha256 != payload["content_sha256"]:
        return None
    return asset


class _RolePreparer:
    """Prepares one role's pool, appending exactly the facts the log does not hold yet."""

    def __init__(
        self,
        ledger: _Ledger,
        progress: _Progress,
        role: str,
        provider: AssetProvider,
        query: AssetQuery,
        limit: int,
        context: PreparationContext,
    ) -> None:
        self.ledger, self.progress, self.role = ledger, progress, role
        self.provider, self.query, self.limit, self.context = provider, query, limit, context
        self._relisted: dict[str, AssetCandidate] | None = None

    def run(self) -> list[PreparedAsset]:
        if self.role in self.progress.listing_failed:
            return []
        logged = self.progress.listed.get(self.role)
        if logged is None:
            try:
                candidates = list_candidates(self.provider, self.query, self.limit)
            except Exception as error:
                self.ledger.emit(
                    "CandidateListingFailed",
                    {"role": self.role, "error_type": type(error).__name__, "detail": str(error)},
                )
                return []
            self._relisted = {c.candidate_id: c for c in candidates}
            logged = [c.candidate_id for c in candidates]
            self.ledger.emit(
                "CandidatesListed",
                {
                    "role": self.role,
                    "query": self.query.to_dict(),
                    "limit": self.limit,
                    "candidate_ids": logged,
                },
            )
        pool: list[PreparedAsset] = []
        outcomes = self.progress.outcomes.get(self.role, {})
        for candidate_id in logged:
            previous = outcomes.get(candidate_id)
            if previous is not None and previous[0] == "rejected":
                continue
            if previous is not None:
                reused = _reuse_snapshot(previous[1])
                if reused is not None:
                    pool.append(reused)
                    continue
            self.ledger.heartbeat()
            prepared = self._prepare(candidate_id, previous[1] if previous else None)
            if prepared is not None:
                pool.append(prepared)
        return pool

    def _candidate(self, candidate_id: str) -> AssetCandidate:
        """The candidate object of a logged id; on resume the provider lists again."""
        if self._relisted is None:
            self._relisted = {}  # a failed re-listing is not retried for every candidate
            self._relisted = {
                c.candidate_id: c for c in list_candidates(self.provider, self.query, self.limit)
            }
        if candidate_id not in self._relisted:
            raise ProviderMisbehaved(
                f"candidate {candidate_id!r} is no longer listed by the provider"
            )
        return self._relisted[candidate_id]

    def _prepare(self, candidate_id: str, logged: dict[str, Any] | None) -> PreparedAsset | None:
        try:
            prepared = _materialize(self.provider, self._candidate(candidate_id), self.context)
        except Exception as error:
            self.ledger.emit(
                "CandidateRejected",
                {
                    "role": self.role,
                    "candidate_id": candidate_id,
                    "stage": "materialize",
                    "error_type": type(error).__name__,
                    "detail": str(error),
                },
            )
            return None
        payload = {
            "role": self.role,
            "candidate_id": candidate_id,
            "asset_id": prepared.asset_id,
            "content_sha256": prepared.content_sha256,
            "snapshot_dir": str(prepared.snapshot_dir),
        }
        if payload != logged:  # a repaired snapshot with identical facts needs no new event
            self.ledger.emit("CandidatePrepared", payload)
        return prepared


# --------------------------------------------------------------------------- batches


def _matching_payload(batch_index: int, seed: int, error: MatchingError) -> dict[str, Any]:
    details = error.to_dict()
    return {
        "batch_index": batch_index,
        "seed": seed,
        "error_type": type(error).__name__,
        "detail": str(error),
        "rejections": list(details.get("rejections", [])),
        "role_summaries": dict(details.get("role_summaries", {})),
        "search_nodes": int(error.search_nodes),
        "budget_exhausted": bool(error.budget_exhausted),
    }


def _resolved_payload(batch_index: int, resolved: ResolvedAssetSet) -> dict[str, Any]:
    return {
        "batch_index": batch_index,
        "seed": resolved.seed,
        "asset_set_id": resolved.set_id,
        "requirements_digest": resolved.requirements_digest,
        "assets": {role: resolved.assets[role].identity for role in sorted(resolved.assets)},
        "search_nodes": resolved.search_nodes,
    }


@dataclass
class _Job:
    """Everything one preparation session needs, whether fresh or resumed."""

    ledger: _Ledger
    progress: _Progress
    spec: TaskSpec
    task_path: Path
    requirements: AssetRequirements
    providers: Mapping[str, AssetProvider]
    cfg: CollectionConfig
    output: Path

    def pools(self) -> dict[str, list[PreparedAsset]]:
        context = PreparationContext(str(self.output / CACHE_NAME))
        pools: dict[str, list[PreparedAsset]] = {}
        for role in sorted(self.requirements.roles):
            pools[role] = _RolePreparer(
                self.ledger,
                self.progress,
                role,
                self.providers[role],
                listing_query(self.requirements, role),
                self.cfg.candidates_per_role,
                context,
            ).run()
            log.info("prepare.role_ready", role=role, prepared=len(pools[role]))
        return pools

    def batch(self, batch_index: int, pools: Mapping[str, Sequence[PreparedAsset]]) -> Deployment:
        done = self.progress.materialized.get(batch_index)
        if done is not None:
            try:
                return validate_deployment(
                    done["deployment_path"], expected_manifest_sha256=done["manifest_sha256"]
                )
            except AssetcastError as error:
                log.warning("prepare.deployment_redo", batch_index=batch_index, error=str(error))
        seed = self.cfg.seed + batch_index
        try:
            resolved = resolve_asset_set(
                self.requirements,
                pools,
                seed=seed,
                max_candidates_per_role=self.cfg.candidates_per_role,
                max_search_nodes=self.cfg.max_search_nodes,
            )
        except MatchingError as error:
            self.ledger.emit("BatchUnresolvable", _matching_payload(batch_index, seed, error))
            raise PreparationFailed(
                f"batch {batch_index} (seed {seed}): no asset set satisfies the requirements: "
                f"{error}"
            ) from error
        logged = self.progress.resolved.get(batch_index)
        if logged is None:
            self.ledger.emit("BatchResolved", _resolved_payload(batch_index, resolved))
        elif logged["asset_set_id"] != resolved.set_id:
            raise NondeterministicResume(
                f"batch {batch_index}: resolved {resolved.set_id}, log has {logged['asset_set_id']}"
            )
        deployment = materialize_deployment(
            self.spec,
            self.requirements,
            resolved,
            output_dir=self.output / batch_dir_name(batch_index),
            batch_index=batch_index,
            task_path=self.task_path,
        )
        if done is None:
            self.ledger.emit(
                "DeploymentMaterialized",
                {
                    "batch_index": batch_index,
                    "asset_set_id": resolved.set_id,
                    "deployment_path": str(deployment.path),
                    "manifest_sha256": deployment.manifest_sha256,
                },
            )
        elif done["manifest_sha256"] != deployment.manifest_sha256:
            raise NondeterministicResume(
                f"batch {batch_index}: rebuilt manifest differs from the logged one"
            )
        return deployment

    def run(self) -> tuple[Deployment, ...]:
        self.output.mkdir(parents=True, exist_ok=True)
        pools = self.pools()
        deployments = tuple(self.batch(i, pools) for i in range(self.cfg.max_batches))
        self.ledger.emit("PreparationCompleted", {"batches": len(deployments)})
        return deployments


# --------------------------------------------------------------------------- driving a session


def _write_report(store: Any, run_id: str, output: Path) -> Path:
    path = output / REPORT_NAME
    write_json_atomic(path, preparation_report(store.read(run_id)))
    return path


def _record_failure(ledger: _Ledger, output: Path, error: BaseException) -> None:
    """Append ``RunFailed`` and write the failed report; secondary failures become notes."""
    cause = error.__cause__ if isinstance(error, PreparationFailed) else error
    assert cause is not None
    payload = {
        "phase": _PHASE,
        "error_type": type(cause).__name__,
        "detail": str(cause),
        "traceback": "".join(traceback.format_exception(error)),
        "batch_index": None,
        "episode_index": None,
    }
    try:
        ledger.emit("RunFailed", payload)
    except Exception as secondary:
        error.add_note(f"recording RunFailed failed: {type(secondary).__name__}: {secondary}")
    try:
        _write_report(ledger.store, ledger.run_id, output)
    except Exception as secondary:
        error.add_note(f"writing {REPORT_NAME} failed: {type(secondary).__name__}: {secondary}")


def _drive(job: _Job) -> PreparationResult:
    try:
        deployments = job.run()
        report_path = _write_report(job.ledger.store, job.ledger.run_id, job.output)
    except BaseException as error:
        _record_failure(job.ledger, job.output, error)
        raise
    finally:
        try:
            job.ledger.release()
        except Exception as error:  # the run's outcome is already in the log
            log.warning("prepare.lease_release_failed", error=str(error))
    log.info("prepare.done", run_id=job.ledger.run_id, batches=len(deployments))
    return PreparationResult(job.ledger.run_id, deployments, report_path)


def _task_digest(task_path: Path) -> str:
    return sha256_hex(task_path.read_bytes())


def prepare(
    task_path: str | Path,
    providers_by_role: Mapping[str, AssetProvider],
    *,
    cfg: CollectionConfig,
    output_dir: str | Path,
    store: Any,
    goal: str = "prepare",
    run_id: str | None = None,
    lease_ttl_s: float = LEASE_TTL_S,
) -> PreparationResult:
    """Create a run and prepare its deployments; returns them in batch order.

    All input is checked before the first event, so bad input leaves neither the store nor
    the output directory touched. Provider failures are recorded rejections; a batch no
    asset set satisfies raises ``PreparationFailed`` after ``RunFailed`` is logged.
    """
    if not isinstance(cfg, CollectionConfig):
        raise TypeError(f"cfg must be a CollectionConfig, not {type(cfg).__name__}")
    cfg = CollectionConfig.from_dict(cfg.to_dict())
    if goal not in ("prepare", "run"):
        raise AssetcastInputError(f"goal: expected 'prepare' or 'run', got {goal!r}")
    source = Path(task_path).resolve()
    spec = load_task(source)
    requirements = _requirements_of(spec, source)
    _check_providers(providers_by_role, requirements)
    output = _check_output_dir(output_dir)
    descriptions = _describe(providers_by_role)
    run_id = run_id or new_run_id()
    try:
        store.state(run_id)
    except UnknownRun:
        pass
    else:
        raise AssetcastInputError(f"run {run_id} already exists")

    session_id = new_session_id()
    created = {
        "run_id": run_id,
        "goal": goal,
        "task_id": spec.task_id,
        "task_path": str(source),
        "task_sha256": _task_digest(source),
        "config": cfg.to_dict(),
        "providers": descriptions,
        "output_dir": str(output),
        "tool_version": tool_version(),
    }
    ledger = _Ledger(store, run_id, 0, None)
    ledger.emit("RunCreated", created)
    log.info("prepare.start", run_id=run_id, output_dir=str(output))
    job = _Job(ledger, _Progress(), spec, source, requirements, providers_by_role, cfg, output)
    try:
        ledger.lease = store.acquire_lease(run_id, owner=session_id, ttl_s=lease_ttl_s)
        ledger.emit("PreparationStarted", _session_payload(session_id))
    except BaseException as error:
        _record_failure(ledger, output, error)
        ledger.release()
        raise
    return _drive(job)


def _remove_cache_temp_dirs(cache: Path) -> None:
    """Snapshots half-built by the killed session; the cache never reuses them, but they
    would sit in the output directory forever."""
    from runtime.assets.cache import TMP_PREFIX

    if cache.is_dir():
        for leftover in sorted(cache.glob(f"{TMP_PREFIX}*")):
            shutil.rmtree(leftover, ignore_errors=True)
            log.info("prepare.cache_temp_removed", path=str(leftover))


def _rebuild_providers(descriptions: Mapping[str, Any]) -> dict[str, AssetProvider]:
    from runtime.assets.providers import provider_from_description

    return {role: provider_from_description(descriptions[role]) for role in sorted(descriptions)}


def resume_preparation(
    run_id: str,
    *,
    store: Any,
    providers_by_role: Mapping[str, AssetProvider] | None = None,
    lease_ttl_s: float = LEASE_TTL_S,
) -> PreparationResult:
    """Finish the preparation of a run killed (or failed) while preparing.

    Takes over the run's lease (refused while another session's lease is live), appends
    ``RunResumed``, drops half-written deployment folders, keeps every logged fact that still
    verifies on disk and redoes the rest.
    """
    state = store.state(run_id)
    if not (state.state == _PHASE or (state.state == "failed" and state.failed_from == _PHASE)):
        raise AssetcastInputError(
            f"run {run_id} is {state.state!r}; only a run interrupted or failed while preparing"
            " can resume preparation"
        )
    created = state.created
    source = Path(created["task_path"])
    if not source.is_file():
        raise AssetcastInputError(f"{source}: task file of run {run_id} no longer exists")
    if _task_digest(source) != created["task_sha256"]:
        raise AssetcastInputError(f"{source}: task file changed since run {run_id} was created")
    spec = load_task(source)
    requirements = _requirements_of(spec, source)
    cfg = CollectionConfig.from_dict(created["config"])
    if providers_by_role is None:
        providers_by_role = _rebuild_providers(created["providers"])
    _check_providers(providers_by_role, requirements)
    output = Path(created["output_dir"])

    session_id = new_session_id()
    lease = store.acquire_lease(run_id, owner=session_id, ttl_s=lease_ttl_s)
    try:
        current = store.state(run_id)
        ledger = _Ledger(store, run_id, current.version, lease)
        ledger.emit(
            "RunResumed",
            {**_session_payload(session_id), "from_state": current.state, "to_state": _PHASE},
        )
    except BaseException:
        lease.release()
        raise
    log.info("prepare.resume", run_id=run_id, from_state=current.state)
    progress = _Progress.from_events(store.read(run_id))
    job = _Job(ledger, progress, spec, source, requirements, providers_by_role, cfg, output)
    try:
        remove_temp_dirs(output)
        _remove_cache_temp_dirs(output / CACHE_NAME)
    except BaseException as error:
        _record_failure(ledger, output, error)
        ledger.release()
        raise
    return _drive(job)


__all__ = [
    "PreparationFailed",
    "PreparationResult",
    "ProviderContractError",
    "listing_query",
    "prepare",
    "providers_from_catalog_args",
    "resume_preparation",
]
