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

This module is the public API and the two ways a preparation session starts (a new run, or
a resumed one); the pieces they share live in ``runtime.preparation``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from domain.assets import AssetProvider
from domain.config import CollectionConfig
from domain.errors import AssetcastInputError, UnknownRun
from runtime.assets.entity_packages import check_entity_packages, entity_package_dirs
from runtime.deployment import remove_temp_dirs
from runtime.files import remove_dead_temps
from runtime.preparation.batch_job import CACHE_NAME, PreparationJob
from runtime.preparation.candidates import listing_query
from runtime.preparation.errors import PreparationFailed, ProviderContractError
from runtime.preparation.identifiers import new_run_id, tool_version
from runtime.preparation.input_checks import (
    check_output_dir,
    check_providers,
    describe_providers,
    providers_from_catalog_args,
    requirements_of,
)
from runtime.preparation.ledger import Ledger
from runtime.preparation.logged_progress import LoggedProgress
from runtime.preparation.session_outcome import (
    PHASE,
    PreparationResult,
    drive,
    record_failure,
)
from runtime.session import Session, provably_dead, session_hosts
from runtime.taskfile import load_task_with_digest

log = structlog.get_logger(__name__)


def prepare(
    task_path: str | Path,
    providers_by_role: Mapping[str, AssetProvider],
    *,
    cfg: CollectionConfig,
    output_dir: str | Path,
    store: Any,
    goal: str = "prepare",
    run_id: str | None = None,
    lease_ttl_s: float | None = None,
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
    spec, task_sha256 = load_task_with_digest(source)
    from runtime.sim.robots import check_reach  # the simulator only loads for a real prepare

    check_reach(spec, source=str(source))
    from runtime.sim.registry import unregistered_message, unregistered_names

    missing = unregistered_names(spec)  # such a run could never be collected
    if missing:
        raise AssetcastInputError(f"{source}: {unregistered_message(missing)}")
    requirements = requirements_of(spec, source)
    entity_packages = entity_package_dirs(spec, source)
    check_entity_packages(entity_packages, cfg.mesh_limits)
    check_providers(providers_by_role, requirements)
    output = check_output_dir(output_dir)
    descriptions = describe_providers(providers_by_role)
    run_id = run_id or new_run_id()
    try:
        store.state(run_id)
    except UnknownRun:
        pass
    else:
        raise AssetcastInputError(f"run {run_id} already exists")

    created = {
        "run_id": run_id,
        "goal": goal,
        "task_id": spec.task_id,
        "task_path": str(source),
        "task_sha256": task_sha256,
        "config": cfg.to_dict(),
        "providers": descriptions,
        "output_dir": str(output),
        "tool_version": tool_version(),
    }
    # The lease comes first, so even RunCreated is fenced by it.
    session = Session.open(store, run_id, ttl_s=lease_ttl_s)
    ledger = Ledger(store, run_id, 0, session)
    try:
        ledger.emit("RunCreated", created)
    except BaseException:
        ledger.release()
        raise
    log.info("prepare.start", run_id=run_id, output_dir=str(output), lease_token=session.token)
    job = PreparationJob(
        ledger, LoggedProgress(), spec, source, requirements, providers_by_role, cfg, output,
        entity_packages,
    )
    try:
        ledger.emit("PreparationStarted", session.identity())
    except BaseException as error:
        record_failure(ledger, output, error)
        ledger.release()
        raise
    return drive(job)


def _remove_dead_temps(output: Path, events: list[Any], own: str) -> None:
    """Temporary deployment and snapshot folders of sessions that provably died (never a
    stalled session's: it may still be writing; if it wakes up, its fence stops it and it
    removes its own folder)."""
    from runtime.assets.cache import TMP_PREFIX

    hosts = session_hosts(events)

    def is_dead(owner: str) -> bool:
        return provably_dead(owner, hosts, own)

    remove_temp_dirs(output, is_dead)
    cache = output / CACHE_NAME
    if cache.is_dir():
        remove_dead_temps(sorted(cache.glob(f"{TMP_PREFIX}*")), is_dead)


def _rebuild_providers(descriptions: Mapping[str, Any]) -> dict[str, AssetProvider]:
    from runtime.assets.providers import provider_from_description

    return {role: provider_from_description(descriptions[role]) for role in sorted(descriptions)}


def resume_preparation(
    run_id: str,
    *,
    store: Any,
    providers_by_role: Mapping[str, AssetProvider] | None = None,
    lease_ttl_s: float | None = None,
) -> PreparationResult:
    """Finish the preparation of a run killed (or failed) while preparing.

    Takes over the run's lease (refused while another session's lease is live), appends
    ``RunResumed``, drops half-written deployment folders, keeps every logged fact that still
    verifies on disk and redoes the rest.
    """
    state = store.state(run_id)
    if not (state.state == PHASE or (state.state == "failed" and state.failed_from == PHASE)):
        raise AssetcastInputError(
            f"run {run_id} is {state.state!r}; only a run interrupted or failed while preparing"
            " can resume preparation"
        )
    created = state.created
    source = Path(created["task_path"])
    if not source.is_file():
        raise AssetcastInputError(f"{source}: task file of run {run_id} no longer exists")
    spec, task_sha256 = load_task_with_digest(source)
    if task_sha256 != created["task_sha256"]:
        raise AssetcastInputError(f"{source}: task file changed since run {run_id} was created")
    requirements = requirements_of(spec, source)
    cfg = CollectionConfig.from_dict(created["config"])
    entity_packages = entity_package_dirs(spec, source)
    check_entity_packages(entity_packages, cfg.mesh_limits)
    if providers_by_role is None:
        providers_by_role = _rebuild_providers(created["providers"])
    check_providers(providers_by_role, requirements)
    output = Path(created["output_dir"])

    session = Session.open(store, run_id, ttl_s=lease_ttl_s)
    try:
        current = store.state(run_id)
        ledger = Ledger(store, run_id, current.version, session)
        ledger.emit(
            "RunResumed",
            {**session.identity(), "from_state": current.state, "to_state": PHASE},
        )
    except BaseException:
        session.close()
        raise
    log.info(
        "prepare.resume", run_id=run_id, from_state=current.state, lease_token=session.token
    )
    events = store.read(run_id)
    progress = LoggedProgress.from_events(events)
    job = PreparationJob(
        ledger, progress, spec, source, requirements, providers_by_role, cfg, output,
        entity_packages,
    )
    try:
        _remove_dead_temps(output, events, session.session_id)
    except BaseException as error:
        record_failure(ledger, output, error)
        ledger.release()
        raise
    return drive(job)


__all__ = [
    "PreparationFailed",
    "PreparationResult",
    "ProviderContractError",
    "listing_query",
    "prepare",
    "providers_from_catalog_args",
    "resume_preparation",
]
