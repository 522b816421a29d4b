"""One episode on a worker's environment, from reset to its verdict and its files' bytes.

Nothing here touches the store or the run's output directory: a worker (in this process or
on another machine) runs the episode and returns its events up to `EpisodeJudged`, the
verdict, and, for an accepted recorded episode, the encoded bytes of its trajectory and
camera files. The driver (:mod:`runtime.collection.commit`), which holds the run's lease,
writes those files durably and then appends the episode's events in ONE transaction, so the
log either knows the whole episode, including a receipt for a file already on disk, or
nothing of it (and resume re-runs it from its start).

After the verdict (and the encoding of its files) the environment is asked to return to its
nominal state with ``env.reset(None)``; only when that call returns does the episode get
`ResetSubmitted`. A reset that raises leaves a *done* episode (its verdict and files stand)
without `ResetSubmitted`; the driver logs it and then fails the run with that error.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from domain.task import CheckSpec
from runtime.seeds import episode_seed

ACCEPTED = "accepted"
INITIAL_CHECKS_FAILED = "initial_checks_failed"
PROGRAM_INCOMPLETE = "program_incomplete"
FINAL_CHECKS_FAILED = "final_checks_failed"
RECORDING_DISABLED = "recording_disabled"

Events = list[tuple[str, dict[str, Any]]]
CameraFile = tuple[str | None, str, str, bytes]
"""``(camera, modality, file name, bytes)``; the metadata file has camera ``None``."""


@dataclass(frozen=True)
class EpisodeContext:
    """What an episode needs to know about its place in the run (no paths of the driver)."""

    batch_index: int
    batch_seed: int
    asset_set_id: str
    manifest_sha256: str
    manifest_roles: dict[str, Any]
    record: bool  # False: recording disabled
    cameras: Any = None  # runtime.sim.cameras.CameraRig when the task has cameras
    run_id: str = ""
    task_id: str = ""
    keep_rejected: bool = False  # also encode the files of a rejected recorded episode


@dataclass(frozen=True)
class EpisodeFiles:
    """The encoded files of an accepted recorded episode (trajectory first, then cameras)."""

    trajectory: bytes
    cameras: tuple[CameraFile, ...] = ()
    encode_s: float = 0.0

    @property
    def size(self) -> int:
        return len(self.trajectory) + sum(len(f[3]) for f in self.cameras)


@dataclass(frozen=True)
class EpisodeRun:
    """An episode as a worker saw it.

    ``events`` run from `EpisodeStarted` to `EpisodeJudged`; ``files`` is set exactly when the
    trajectory is to be committed (otherwise ``discard_reason`` says why not). ``reset_s`` is
    the post-episode reset's duration, None when ``reset_error`` is set (it raised)."""

    batch_index: int
    episode_index: int
    events: Events
    accepted: bool
    files: EpisodeFiles | None
    discard_reason: str | None
    reset_s: float | None
    reset_error: BaseException | None = None
    rejected_files: EpisodeFiles | None = None  # --keep-rejected: what a rejected one recorded


def _sim() -> Any:
    """The simulator package, imported lazily so planning and refusals stay cheap."""
    import runtime.sim as sim

    return sim


def trajectory_metadata(ctx: EpisodeContext, episode_index: int, seed: int) -> dict[str, Any]:
    """Provenance stored inside the trajectory file.

    Only facts fixed by the run, its task, the assets and the seed go in (the run id and
    task id, never the session, host, path, worker or time), so a resumed run, or one on any
    number of workers, writes byte-identical files to an uninterrupted one-process run.
    """
    return {
        "schema_version": 1,
        "run_id": ctx.run_id,
        "task_id": ctx.task_id,
        "batch_index": ctx.batch_index,
        "episode_index": episode_index,
        "batch_seed": ctx.batch_seed,
        "episode_seed": seed,
        "asset_set_id": ctx.asset_set_id,
        "manifest_sha256": ctx.manifest_sha256,
        "roles": ctx.manifest_roles,
    }


def encode_files(
    env: Any, recorder: Any, ctx: EpisodeContext, episode_index: int, seed: int
) -> EpisodeFiles:
    """The episode's trajectory and camera files as bytes (cameras only with a rig)."""
    from runtime.sim.recorder import trajectory_bytes

    started = time.perf_counter()
    cameras: tuple[CameraFile, ...] = ()
    if ctx.cameras is not None:
        from runtime.sim.cameras import control_rate_hz
        from runtime.sim.cameras.storage import episode_files

        cameras = tuple(
            episode_files(recorder, ctx.batch_index, episode_index, control_rate_hz(env))
        )
    payload = recorder.to_payload(trajectory_metadata(ctx, episode_index, seed))
    data = trajectory_bytes(payload)
    return EpisodeFiles(data, cameras, round(time.perf_counter() - started, 6))


def run_episode(
    env: Any,
    ctx: EpisodeContext,
    episode_index: int,
    *,
    initial_checks: Sequence[CheckSpec],
    final_checks: Sequence[CheckSpec],
) -> EpisodeRun:
    """Reset, check, execute, judge, encode and reset one episode. Exceptions before the
    verdict is complete propagate (the episode is not done)."""
    sim = _sim()
    b, j = ctx.batch_index, episode_index
    seed = episode_seed(ctx.batch_seed, j)
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    clock = _PhaseClock()
    env.reset(seed)
    reset_s = clock.lap()
    initial = tuple(env.run_checks(initial_checks))
    initial_passed = bool(sim.checks_accept(initial))
    events: Events = [
        (
            "EpisodeStarted",
            {
                "batch_index": b, "episode_index": j, "seed": seed, "started_at": started_at,
                "reset_s": reset_s,
            },
        ),
        (
            "InitialChecked",
            {
                "batch_index": b,
                "episode_index": j,
                "passed": initial_passed,
                "checks": [c.to_dict() for c in initial],
                "duration_s": clock.lap(),
            },
        ),
    ]
    recorder = None
    final: tuple[Any, ...] = ()
    if not initial_passed:
        reason = INITIAL_CHECKS_FAILED
    else:
        if ctx.record:
            recorder = sim.TrajectoryRecorder.for_environment(env)
            if ctx.cameras is not None:
                from runtime.sim.cameras import FrameRecorder

                recorder = FrameRecorder(recorder, ctx.cameras, env)
        program = env.run_program(recorder)
        events.append(
            (
                "EpisodeExecuted",
                {
                    "batch_index": b,
                    "episode_index": j,
                    "completed": bool(program.completed),
                    "steps": int(program.steps),
                    "skills": [s.to_dict() for s in program.skills],
                    "detail": str(program.detail),
                    "duration_s": clock.lap(),
                },
            )
        )
        if not program.completed:
            reason = PROGRAM_INCOMPLETE
        else:
            final = tuple(env.run_checks(final_checks))
            reason = ACCEPTED if sim.checks_accept(final) else FINAL_CHECKS_FAILED
    accepted = reason == ACCEPTED
    events.append(
        (
            "EpisodeJudged",
            {
                "batch_index": b,
                "episode_index": j,
                "accepted": accepted,
                "checks": [c.to_dict() for c in final],
                "reason": reason,
                "duration_s": clock.lap(),
            },
        )
    )
    files: EpisodeFiles | None = None
    kept: EpisodeFiles | None = None
    discard: str | None = None
    if accepted and recorder is not None:
        files = encode_files(env, recorder, ctx, j, seed)
    else:
        discard = RECORDING_DISABLED if accepted else reason
        if not accepted and recorder is not None and ctx.keep_rejected:
            kept = encode_files(env, recorder, ctx, j, seed)
    clock.lap()
    # Only now, with the verdict fixed and the files encoded, is the environment asked to
    # return to its nominal state. ResetSubmitted records that this request was made and
    # returned; if it raised, the episode is still done (commit-or-discard) but not reset.
    del recorder
    try:
        env.reset(None)
    except BaseException as error:  # KeyboardInterrupt too: the verdict is still logged
        return EpisodeRun(
            b, j, events, accepted, files, discard, None, reset_error=error, rejected_files=kept
        )
    return EpisodeRun(b, j, events, accepted, files, discard, clock.lap(), rejected_files=kept)


class _PhaseClock:
    """Monotonic durations of an episode's consecutive phases (wall-clock jumps ignored)."""

    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        return round(elapsed, 6)
