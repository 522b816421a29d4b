"""A batch worker: ONE environment, reused across the batches it is given.

The same class runs in the driver's process (``local``) and inside a Ray actor (``ray``):
it validates the deployment, builds its environment for the first batch it sees and only
replaces the role bodies for the next ones, and runs episodes (:mod:`runtime.collection.episode`).
It holds no lease and writes nothing: what it returns is bytes and facts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.collection.episode import EpisodeContext, EpisodeRun, run_episode
from runtime.collection.executors.base import BatchOpened, BatchWork, Where, WorkSettings


class BatchWorker:
    def __init__(
        self, settings: WorkSettings, name: str = "local", cache_root: Path | None = None
    ) -> None:
        self.settings = settings
        self.name = name
        self.cache_root = cache_root  # where deployments received by content are materialized
        self.env: Any = None
        self.cameras: Any = None  # runtime.sim.cameras.CameraRig, built with the first batch
        self.where: Where | None = None
        self._batches: dict[int, tuple[EpisodeContext, Any, Any]] = {}

    def open(self, work: BatchWork) -> BatchOpened:
        """Verify the batch's deployment (every digest, before anything is built) and make
        the environment hold its assets."""
        from runtime.taskfile import load_task

        b = work.batch_index
        self.where = Where("validate_deployment", b, None)
        deployment = self.deployment(work)
        task = load_task(deployment.task_path)
        built = self.env is None
        if built:
            self.where = Where("build_environment", b, None)
            self.env = self.settings.factory(
                deployment.path, seed=work.seed, settle_steps=self.settings.settle_steps
            )
            # Built from this very deployment: no role body was swapped.
            roles_replaced: tuple[str, ...] = ()
            entities_kept = tuple(e.entity_id for e in task.scene.entities)
        else:
            self.where = Where("replace_assets", b, None)
            info = self.env.replace_assets(deployment.path)
            roles_replaced = tuple(info.roles_replaced)
            entities_kept = tuple(info.entities_kept)
        settings = self.settings
        initial = settings.initial_checks
        final = settings.final_checks
        ctx = EpisodeContext(
            batch_index=b,
            batch_seed=work.seed,
            asset_set_id=work.asset_set_id,
            manifest_sha256=deployment.manifest_sha256,
            manifest_roles=dict(deployment.manifest.get("roles", {})),
            record=settings.record,
            cameras=self.camera_rig(task),
            run_id=settings.run_id,
            task_id=task.task_id,
            keep_rejected=settings.keep_rejected,
        )
        self._batches = {
            b: (
                ctx,
                initial if initial is not None else task.checks.initial,
                final if final is not None else task.checks.final,
            )
        }
        self.where = None
        return BatchOpened(
            batch_index=b,
            worker=self.name,
            built=built,
            constructions=int(getattr(self.env, "constructions", 1)) if built else 0,
            roles_replaced=roles_replaced,
            entities_kept=entities_kept,
        )

    def deployment(self, work: BatchWork) -> Any:
        """The deployment in place (this process can read the driver's folder) or, when it
        came by content, materialized into this worker's own cache."""
        from runtime.deployment import validate_deployment

        if work.package is None:
            return validate_deployment(
                work.deployment_path, expected_manifest_sha256=work.manifest_sha256
            )
        from runtime.collection.deployment_transfer import materialize_package

        if self.cache_root is None:
            raise RuntimeError("a worker given deployments by content needs a cache_root")
        return materialize_package(work.package, self.cache_root)

    def episode(self, batch_index: int, episode_index: int) -> EpisodeRun:
        """Run one episode of the batch last opened."""
        ctx, initial, final = self._batches[batch_index]
        self.where = Where("episode", batch_index, episode_index)
        run = run_episode(
            self.env, ctx, episode_index, initial_checks=initial, final_checks=final
        )
        self.where = None
        return run

    def camera_rig(self, task: Any) -> Any:
        """The worker's camera rig (None when not recording or the task has no cameras)."""
        if not self.settings.record or not task.cameras:
            return None
        if self.cameras is None:
            from runtime.sim.cameras import CameraRig

            self.cameras = CameraRig(task.cameras)
        return self.cameras

    def close(self) -> None:
        """Free the renderers' GL contexts (before the model they draw goes away), then the
        environment. Idempotent."""
        env, self.env = self.env, None
        cameras, self.cameras = self.cameras, None
        if cameras is not None:
            cameras.close()
        if env is not None:
            env.close()
