"""Which executor a collection runs on, chosen from ``--workers`` / ``--ray-address``.

One worker and no address is the embedded default: the in-process executor, no Ray.
Anything else runs on Ray (``pip install 'assetcast[ray]'``): ``--workers N`` alone starts a
local Ray instance for this process, ``--ray-address ADDR`` joins an existing cluster.
Options are checked, and Ray is started or joined (:meth:`ExecutorOptions.connected`),
before anything is recorded: a bad flag or an unreachable cluster is exit 2 naming the flag.
"""

from __future__ import annotations

import importlib.util
import math
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from runtime.collection.executors.base import Executor, WorkSettings
from runtime.collection.plan import CollectionRefused

MAX_WORKERS = 4096


@dataclass(frozen=True)
class ExecutorOptions:
    workers: int = 1
    ray_address: str | None = None
    episode_deadline_s: float | None = None  # Ray: None is ray.EPISODE_DEADLINE_S

    @property
    def uses_ray(self) -> bool:
        return self.workers != 1 or self.ray_address is not None

    def check(self) -> ExecutorOptions:
        """Refuse bad values (CollectionRefused, exit 2); returns self."""
        workers = self.workers
        if type(workers) is not int or not 1 <= workers <= MAX_WORKERS:
            raise CollectionRefused(
                f"--workers: must be an integer in [1, {MAX_WORKERS}], got {workers!r}"
            )
        address = self.ray_address
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise CollectionRefused("--ray-address: must be a non-empty address (host:port)")
        deadline = self.episode_deadline_s
        if deadline is not None and (
            isinstance(deadline, bool) or not isinstance(deadline, int | float)
            or not math.isfinite(deadline) or deadline <= 0
        ):
            raise CollectionRefused(
                f"--episode-deadline: must be a number of seconds > 0, got {deadline!r}"
            )
        if self.uses_ray and importlib.util.find_spec("ray") is None:
            flag = "--ray-address" if address is not None else "--workers"
            raise CollectionRefused(
                f"{flag}: collection on several workers needs Ray; "
                "install it with: pip install 'assetcast[ray]'"
            )
        return self

    def connected(self) -> AbstractContextManager[None]:
        """Ray up for the block (raises ``RayUnavailable``, an input error, when it cannot be
        started or joined); nothing at all for the in-process executor. Enter it before the
        run's lease is taken."""
        if not self.uses_ray:
            return nullcontext()
        from runtime.collection.executors.ray_connection import connected

        return connected(self.workers, self.ray_address)

    def build(self, settings: WorkSettings) -> Executor:
        if not self.uses_ray:
            from runtime.collection.executors.local import LocalExecutor

            return LocalExecutor(settings)
        from runtime.collection.executors.ray import RayExecutor

        return RayExecutor(
            settings, workers=self.workers, address=self.ray_address,
            episode_deadline_s=self.episode_deadline_s,
        )
