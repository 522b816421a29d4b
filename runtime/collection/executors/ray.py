"""The Ray executor: batches on many workers, each a Ray actor holding ONE environment.

The driver stays the run's single writer; an actor only runs what it is given and returns
facts and bytes through Ray's object store:

* ``open(work, package)`` materializes the deployment from its bytes into the actor's own
  folder (every digest verified before anything is built) and builds the environment, or
  only replaces the role bodies when it already holds one;
* ``episode(b, j)`` runs one episode and returns its events and encoded files.

Each actor is a fresh process started by Ray (never forked from a process that holds a GL
context) and works in a fresh directory of its own, so nothing depends on a shared
filesystem. A batch stays on one actor (its episodes in index order, a few queued ahead so
the actor never waits for the driver). Reports reach the driver in per-batch order.

A worker that dies (process killed, node lost) loses only what it had not reported: the
batch's remaining episodes are re-dispatched, first, to a fresh actor (which opens the batch
again), so an episode is logged once however often its worker died. An episode whose worker
dies :data:`MAX_DEATHS_PER_EPISODE` times fails the run (resumably) with :class:`WorkerLost`.
An error raised inside a worker is re-raised here as the worker's own exception (same class,
message and notes), placed at the step it came from.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from domain.errors import AssetcastError
from runtime.collection.deployment_transfer import pack_deployment
from runtime.collection.executors.base import (
    BatchDone,
    BatchOpened,
    BatchWork,
    EpisodeDone,
    Executor,
    Report,
    Where,
    WorkSettings,
)
from runtime.collection.executors.ray_connection import RayUnavailable, connect
from runtime.collection.executors.worker_homes import remove_session_homes

__all__ = ["RayExecutor", "RayUnavailable", "WorkerHung", "WorkerLost"]

log = structlog.get_logger(__name__)

EPISODES_AHEAD = 2  # episodes queued on an actor beyond the one it runs
MAX_DEATHS_PER_EPISODE = 5
WAIT_NOTICE_S = 60.0  # a warning names the batches still waited for after this long
# A worker whose current call (opening a batch, or one episode) has run this long is taken
# for hung: it is killed and its unfinished episodes re-dispatched as for a dead worker.
# The task model has no step budget to derive it from, so the default is generous.
EPISODE_DEADLINE_S = 900.0
FORWARDED_ENV = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "ASSETCAST_RENDER_BACKEND")


class WorkerLost(AssetcastError):
    """Ray workers kept dying on the same episode; the run fails and can be resumed."""


class WorkerHung(AssetcastError):
    """A worker's call outlived the episode deadline; the worker was killed."""


class _ActorBody:
    """The code inside each Ray actor (wrapped by ``ray.remote`` on first use)."""

    def __init__(self, settings: WorkSettings, name: str, session_tag: str) -> None:
        from runtime.collection.executors.worker import BatchWorker
        from runtime.collection.executors.worker_homes import WorkerHome

        self.home = WorkerHome(session_tag, name)  # locked while this process lives
        os.chdir(self.home.path)  # each worker in its own working directory
        self.worker = BatchWorker(settings, name, cache_root=self.home.path / "deployments")
        self.calls: list[tuple[str, float, float]] = []  # (kind, entered, left): perf_counter

    def identity(self) -> dict[str, Any]:
        import ray

        return {
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "node_id": ray.get_runtime_context().get_node_id(),
        }

    def open(self, work: BatchWork, package: Any) -> BatchOpened:
        entered = time.perf_counter()
        try:
            return self.worker.open(dataclasses.replace(work, package=package))
        except BaseException as error:
            error.assetcast_where = self.worker.where  # type: ignore[attr-defined]
            raise
        finally:
            self.calls.append(("open", entered, time.perf_counter()))

    def episode(self, batch_index: int, episode_index: int) -> Any:
        entered = time.perf_counter()
        try:
            return self.worker.episode(batch_index, episode_index)
        except BaseException as error:
            error.assetcast_where = self.worker.where  # type: ignore[attr-defined]
            raise
        finally:
            self.calls.append(("episode", entered, time.perf_counter()))

    def timings(self) -> list[tuple[str, float, float]]:
        """When each call ran (this process's clock): the gaps between queued calls are
        Ray's per-call dispatch and result hand-off cost on the worker's side."""
        return list(self.calls)

    def close(self) -> None:
        try:
            self.worker.close()
        finally:
            os.chdir(self.home.root)
            self.home.remove()


@dataclass
class _Assignment:
    """A batch on one actor: what was sent, what came back."""

    actor: Any
    name: str
    work: BatchWork
    package: Any
    opened: bool = False
    next_episode: int = 0  # index into work.episodes of the next one to send
    reported: int = 0  # episodes reported to the driver
    head_since: float = 0.0  # time.monotonic() when the call now at the head began
    calls: deque[tuple[str, int | None, Any]] = field(default_factory=deque)


class RayExecutor(Executor):
    def __init__(
        self, settings: WorkSettings, *, workers: int, address: str | None = None,
        episode_deadline_s: float | None = None,
    ) -> None:
        self.settings = settings
        self.episode_deadline_s = (
            EPISODE_DEADLINE_S if episode_deadline_s is None else episode_deadline_s
        )
        self.workers = workers
        self.address = address
        self._owns_ray = False
        self._started = False
        self._actors: dict[str, Any] = {}
        self._built: set[str] = set()
        self._generation: dict[int, int] = {}
        self._where: Where | None = None
        self._deaths: dict[tuple[int, int | None], int] = {}
        self.identities: dict[str, dict[str, Any]] = {}
        self._actor_class: Any = None
        # Names this session's worker folders (worker_homes), so the driver can remove them.
        self.session_tag = f"s{os.getpid()}-{secrets.token_hex(4)}"
        # Driver-side costs, for bench/bench_ray.py: packing + putting deployments, and
        # fetching results that were already complete (deserializing the bytes).
        self.pack_s = 0.0
        self.get_s = 0.0
        self.timings: dict[str, list[tuple[str, float, float]]] = {}

    # ------------------------------------------------------------------ set-up

    def _start(self, batches: int | None = None) -> None:
        """Start or join Ray and spawn the workers (no more than there are batches)."""

        if self._started:
            return
        self._started = True
        # Normally already up (ExecutorOptions.connected, before the lease); standalone
        # use (benches) starts or joins it here.
        self._owns_ray = connect(self.workers, self.address)
        wanted = self.workers if batches is None else max(1, min(self.workers, batches))
        for slot in range(wanted):
            self._spawn(slot)
        log.info(
            "ray_workers_started", workers=self.workers, address=self.address,
            owns_ray=self._owns_ray,
        )

    def _spawn(self, slot: int) -> str:
        import ray

        generation = self._generation.get(slot, -1) + 1
        self._generation[slot] = generation
        name = f"ray-{slot}" if generation == 0 else f"ray-{slot}.{generation}"
        options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_task_retries": 0}
        # A Ray instance started by this process passes our environment on to its workers;
        # on a cluster's other machines the rendering choice has to travel with the actor.
        env = {key: os.environ[key] for key in FORWARDED_ENV if key in os.environ}
        if env and self.address not in (None, "auto"):
            options["runtime_env"] = {"env_vars": env}
        if self._actor_class is None:
            self._actor_class = ray.remote(_ActorBody)
        self._actors[name] = self._actor_class.options(**options).remote(
            self.settings, name, self.session_tag
        )
        return name

    def worker_identities(self) -> dict[str, dict[str, Any]]:
        """pid, working directory and node of every live actor (for tests and benches)."""
        import ray

        self._start()
        names = list(self._actors)
        values = ray.get([self._actors[n].identity.remote() for n in names])
        self.identities.update(zip(names, values, strict=True))
        return dict(zip(names, values, strict=True))

    # ------------------------------------------------------------------ the run

    def run(self, batches: Sequence[BatchWork]) -> Iterator[Report]:
        import ray

        if not batches:
            return
        self._start(len(batches))
        queue: deque[BatchWork] = deque(batches)
        free = deque(self._actors)
        inflight: dict[str, _Assignment] = {}
        while queue or inflight:
            while free and queue:
                name = free.popleft()
                inflight[name] = self._assign(name, queue.popleft())
            heads = {a.calls[0][2]: a for a in inflight.values() if a.calls}
            if not heads:  # every call answered: only batch ends are left to report
                for name in list(inflight):
                    a = inflight.pop(name)
                    yield BatchDone(a.work.batch_index, a.name)
                    free.append(name)
                continue
            now = time.monotonic()
            first_due = min(x.head_since for x in heads.values()) + self.episode_deadline_s
            wait_s = max(0.0, min(WAIT_NOTICE_S, first_due - now))
            ready, _ = ray.wait(list(heads), num_returns=1, timeout=wait_s)
            if not ready:
                overdue = [
                    x for x in heads.values()
                    if time.monotonic() - x.head_since >= self.episode_deadline_s
                ]
                for x in overdue:  # hung: handled exactly as a worker that died
                    inflight.pop(x.name)
                    _kind, head_episode, _ref = x.calls[0]
                    step = "opening" if head_episode is None else f"episode {head_episode} of"
                    hung = WorkerHung(
                        f"Ray worker {x.name} ran {step} batch {x.work.batch_index} for "
                        f"over {self.episode_deadline_s:g} s"
                    )
                    replacement = self._replace(x, head_episode, hung)
                    queue.appendleft(self._remaining(x))
                    free.append(replacement)
                if not overdue and wait_s >= WAIT_NOTICE_S:
                    # e.g. a joined cluster without a free CPU for an actor
                    log.warning(
                        "ray_results_pending", waited_s=WAIT_NOTICE_S,
                        batches=sorted(x.work.batch_index for x in inflight.values()),
                        hint="every worker needs one free CPU on the cluster",
                    )
                continue
            a = heads[ready[0]]
            kind, episode_index, ref = a.calls.popleft()
            a.head_since = time.monotonic()  # the actor starts its next call now
            fetch_started = time.perf_counter()
            try:
                value = ray.get(ref)
                self.get_s += time.perf_counter() - fetch_started
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as died:
                inflight.pop(a.name)
                replacement = self._replace(a, episode_index, died)
                queue.appendleft(self._remaining(a))
                free.append(replacement)
                continue
            except ray.exceptions.RayTaskError as error:
                raise self._worker_error(error, a, kind, episode_index) from None
            self._where = None
            if kind == "open":
                a.opened = True
                if value.built:
                    self._built.add(a.name)
                yield value
            else:
                a.reported += 1
                yield EpisodeDone(a.name, value)
                if value.reset_error is not None:
                    return  # the driver logs the episode and fails the run with the error
            self._top_up(a)
            if a.opened and a.reported == len(a.work.episodes) and not a.calls:
                inflight.pop(a.name)
                yield BatchDone(a.work.batch_index, a.name)
                free.append(a.name)

    def _assign(self, name: str, work: BatchWork) -> _Assignment:
        import ray

        started = time.perf_counter()
        package = pack_deployment(work.deployment_path, work.manifest_sha256, work.batch_index)
        actor = self._actors[name]
        a = _Assignment(actor, name, work, ray.put(package), head_since=time.monotonic())
        self.pack_s += time.perf_counter() - started
        a.calls.append(("open", None, actor.open.remote(work, a.package)))
        self._top_up(a)
        return a

    def _top_up(self, a: _Assignment) -> None:
        """Keep the actor busy: up to EPISODES_AHEAD + 1 episodes sent and unanswered."""
        episodes = a.work.episodes
        while a.next_episode < len(episodes) and len(a.calls) <= EPISODES_AHEAD:
            j = episodes[a.next_episode]
            a.calls.append(("episode", j, a.actor.episode.remote(a.work.batch_index, j)))
            a.next_episode += 1

    def _remaining(self, a: _Assignment) -> BatchWork:
        return dataclasses.replace(a.work, episodes=a.work.episodes[a.reported:])

    def _replace(self, a: _Assignment, episode_index: int | None, died: BaseException) -> str:
        """A fresh actor in the dead one's slot; too many deaths on one episode fail the run."""
        import ray

        b = a.work.batch_index
        key = (b, episode_index)
        self._deaths[key] = self._deaths.get(key, 0) + 1
        self._built.discard(a.name)
        self._actors.pop(a.name, None)
        try:
            ray.kill(a.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - it is dead already
            pass
        step = "opening" if episode_index is None else f"episode {episode_index} of"
        log.warning(
            "ray_worker_died", worker=a.name, batch_index=b, episode_index=episode_index,
            deaths=self._deaths[key], detail=str(died).splitlines()[0] if str(died) else "",
        )
        if self._deaths[key] >= MAX_DEATHS_PER_EPISODE:
            self._where = Where("episode" if episode_index is not None else "build_environment",
                                b, episode_index)
            first_line = (str(died).strip().splitlines() or [""])[0][:300]
            raise WorkerLost(
                f"batch {b}: the Ray worker died {self._deaths[key]} times while {step} "
                f"batch {b} ran; last: {type(died).__name__}: {first_line}"
            )
        slot = int(a.name.split("-")[1].split(".")[0])
        return self._spawn(slot)

    def _worker_error(
        self, error: Any, a: _Assignment, kind: str, episode_index: int | None
    ) -> BaseException:
        """The worker's own exception, placed where it happened."""
        cause = getattr(error, "cause", None)
        original = cause if isinstance(cause, BaseException) else error
        where = getattr(original, "assetcast_where", None)
        if not isinstance(where, Where):
            phase = "episode" if kind == "episode" else "validate_deployment"
            where = Where(phase, a.work.batch_index, episode_index)
        self._where = where
        original.add_note(f"Raised in Ray worker {a.name}.")
        return original

    # ------------------------------------------------------------------ endings

    def close(self) -> None:
        """Close every worker's environment, then release the workers (and Ray if this
        executor started it)."""
        import ray

        if not self._started:
            return
        first: BaseException | None = None
        actors, self._actors = self._actors, {}
        self._collect_timings(actors)
        calls = {name: actor.close.remote() for name, actor in actors.items()}
        for name, ref in calls.items():
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                continue  # a dead worker has nothing left to close
            except ray.exceptions.RayTaskError as error:
                cause = getattr(error, "cause", None)
                failure = cause if isinstance(cause, BaseException) else error
                if first is None:
                    first = failure
                else:
                    first.add_note(f"Closing Ray worker {name} also failed: {failure}")
        self._actors = actors
        self.shutdown()
        if first is not None:
            raise first

    def _collect_timings(self, actors: dict[str, Any]) -> None:
        import ray

        for name, actor in actors.items():
            try:
                self.timings[name] = ray.get(actor.timings.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - statistics only; a dead worker has none
                continue

    def shutdown(self) -> None:
        import ray

        actors, self._actors = self._actors, {}
        for actor in actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._built.clear()
        if actors:
            # Killed workers (and any the session lost) left their folders on this machine.
            remove_session_homes(self.session_tag)
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
        self._started = False

    @property
    def built(self) -> bool:
        return bool(self._built)

    @property
    def where(self) -> Where | None:
        return self._where
