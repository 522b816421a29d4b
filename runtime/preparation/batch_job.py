"""A preparation session's work, the same whether fresh or resumed: every role's pool, then
for each batch one resolved asset set and one materialized deployment.

Resolution is deterministic (seed = base seed + batch index), so on resume a batch whose
logged facts still hold on disk is kept, and one that must be redone has to come out
identical; if it does not, ``NondeterministicResume`` stops the run instead of corrupting it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from domain.assets import AssetProvider, PreparationContext, PreparedAsset
from domain.config import CollectionConfig
from domain.errors import AssetcastError
from domain.matching import MatchingError, ResolvedAssetSet, resolve_asset_set
from domain.requirements import AssetRequirements
from domain.task import TaskSpec
from runtime.assets.entity_packages import prepare_entity_packages
from runtime.deployment import (
    Deployment,
    batch_dir_name,
    materialize_deployment,
    validate_deployment,
)
from runtime.preparation.candidates import listing_query, listing_seed
from runtime.preparation.errors import NondeterministicResume, PreparationFailed
from runtime.preparation.ledger import Ledger
from runtime.preparation.logged_progress import LoggedProgress
from runtime.preparation.parallel import MaterializerPool
from runtime.preparation.role_preparer import RolePreparer

log = structlog.get_logger(__name__)

CACHE_NAME = "cache"


def matching_payload(batch_index: int, seed: int, error: MatchingError) -> dict[str, Any]:
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


def resolved_payload(batch_index: int, resolved: ResolvedAssetSet) -> dict[str, Any]:
    return {
        "batch_index": batch_index,
        "seed": resolved.seed,
        "asset_set_id": resolved.set_id,
        "requirements_digest": resolved.requirements_digest,
        "assets": {role: resolved.assets[role].identity for role in sorted(resolved.assets)},
        "search_nodes": resolved.search_nodes,
    }


@dataclass
class PreparationJob:
    """Everything one preparation session needs, whether fresh or resumed."""

    ledger: Ledger
    progress: LoggedProgress
    spec: TaskSpec
    task_path: Path
    requirements: AssetRequirements
    providers: Mapping[str, AssetProvider]
    cfg: CollectionConfig
    output: Path
    entity_packages: Mapping[str, Path] = field(default_factory=dict)
    entity_assets: dict[str, PreparedAsset] = field(default_factory=dict)

    def context(self) -> PreparationContext:
        return PreparationContext(
            str(self.output / CACHE_NAME), self.cfg.mesh_limits, fence=self.ledger.fence
        )

    def pools(self) -> dict[str, list[PreparedAsset]]:
        context = self.context()
        pools: dict[str, list[PreparedAsset]] = {}
        with MaterializerPool() as workers:  # one set of worker processes for every role
            for role in sorted(self.requirements.roles):
                pools[role] = RolePreparer(
                    self.ledger,
                    self.progress,
                    role,
                    self.providers[role],
                    listing_query(self.requirements, role),
                    self.cfg.candidates_per_role,
                    context,
                    workers,
                    seed=listing_seed(self.cfg.seed, role),
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
            self.ledger.emit("BatchUnresolvable", matching_payload(batch_index, seed, error))
            raise PreparationFailed(
                f"batch {batch_index} (seed {seed}): no asset set satisfies the requirements: "
                f"{error}"
            ) from error
        logged = self.progress.resolved.get(batch_index)
        if logged is None:
            self.ledger.emit("BatchResolved", resolved_payload(batch_index, resolved))
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
            fence=self.ledger.fence,
            entity_assets=self.entity_assets,
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
        # Checked before the run was created; a failure now (a mesh that does not load) is
        # this run's recorded failure.
        self.entity_assets = prepare_entity_packages(self.entity_packages, self.context())
        pools = self.pools()
        deployments = tuple(self.batch(i, pools) for i in range(self.cfg.max_batches))
        self.ledger.emit("PreparationCompleted", {"batches": len(deployments)})
        return deployments
