"""One episode, from reset to the events that describe it.

Nothing here touches the store: the episode produces its trajectory file (fsynced by
``commit_trajectory``) and then the complete list of its events, which the collector appends
in ONE transaction. So the log either knows the whole episode, including a receipt for a
file that is already durable, or nothing of it (and resume re-runs it from its start).

After the commit-or-discard the environment is asked to return to its nominal state with
``env.reset(None)``; only when that call returns does the episode get `ResetSubmitted`.
A reset that raises leaves a *done* episode (its verdict and file stand) without
`ResetSubmitted`; the collector logs it and then fails the run with that error.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from domain.task import CheckSpec
from runtime.collect_support.recordings import episode_file_name, to_log_path
from runtime.seeds import episode_seed

ACCEPTED = "accepted"
INITIAL_CHECKS_FAILED = "initial_checks_failed"
PROGRAM_INCOMPLETE = "program_incomplete"
FINAL_CHECKS_FAILED = "final_checks_failed"
RECORDING_DISABLED = "recording_disabled"


@dataclass(frozen=True)
class EpisodeContext:
    """What an episode needs to know about its place in the run."""

    batch_index: int
    batch_seed: int
    asset_set_id: str
    manifest_sha256: str
    manifest_roles: dict[str, Any]
    output_dir: Path
    recording_dir: Path | None  # None: recording disabled
    fence: Any = None  # the session: checked right before a trajectory file is published
    cameras: Any = None  # runtime.sim.cameras.CameraRig when the task has cameras


@dataclass(frozen=True)
class EpisodeRun:
    """The episode's events and verdict. ``reset_error`` is set when the post-episode
    ``env.reset(None)`` raised: ``events`` then end at the commit-or-discard."""

    events: list[tuple[str, dict[str, Any]]]
    accepted: bool
    committed: dict[str, Any] | None
    reset_error: BaseException | None = None


def _sim() -> Any:
    """The simulator package, imported lazily so planning and refusals stay cheap."""
    import runtime.sim as sim

    return sim


def trajectory_metadata(ctx: EpisodeContext, episode_index: int, seed: int) -> dict[str, Any]:
    """Provenance stored inside the trajectory file.

    Only facts fixed by the task, the assets and the seed go in (never the run id, session,
    host, path or time), so a resumed run writes byte-identical files to an uninterrupted one.
    """
    return {
        "schema_version": 1,
        "batch_index": ctx.batch_index,
        "episode_index": episode_index,
        "batch_seed": ctx.batch_seed,
        "episode_seed": seed,
        "asset_set_id": ctx.asset_set_id,
        "manifest_sha256": ctx.manifest_sha256,
        "roles": ctx.manifest_roles,
    }


def commit_frames(
    env: Any, recorder: Any, ctx: EpisodeContext, batch_index: int, episode_index: int
) -> list[dict[str, Any]]:
    """Write the episode's camera files durably (none without cameras); their receipts."""
    if ctx.cameras is None or ctx.recording_dir is None:
        return []
    from runtime.sim.cameras import control_rate_hz
    from runtime.sim.cameras.storage import commit_episode_files

    return commit_episode_files(
        recorder,
        ctx.recording_dir,
        batch_index,
        episode_index,
        control_rate_hz=control_rate_hz(env),
        log_path=lambda path: to_log_path(ctx.output_dir, path),
        fence=ctx.fence,
    )


def run_episode(
    env: Any,
    ctx: EpisodeContext,
    episode_index: int,
    *,
    initial_checks: Sequence[CheckSpec],
    final_checks: Sequence[CheckSpec],
) -> EpisodeRun:
    """Reset, check, execute, judge, commit-or-discard and reset one episode; return its
    events. Exceptions before the commit-or-discard propagate (the episode is not done)."""
    sim = _sim()
    b, j = ctx.batch_index, episode_index
    seed = episode_seed(ctx.batch_seed, j)
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    clock = _PhaseClock()
    env.reset(seed)
    reset_s = clock.lap()
    initial = tuple(env.run_checks(initial_checks))
    initial_passed = bool(sim.checks_accept(initial))
    events: list[tuple[str, dict[str, Any]]] = [
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
        if ctx.recording_dir is not None:
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
    committed: dict[str, Any] | None = None
    if accepted and recorder is not None and ctx.recording_dir is not None:
        files = commit_frames(env, recorder, ctx, b, j)
        payload = recorder.to_payload(trajectory_metadata(ctx, j, seed))
        receipt = sim.commit_trajectory(
            payload, ctx.recording_dir / episode_file_name(b, j), fence=ctx.fence
        )
        committed = {
            "batch_index": b,
            "episode_index": j,
            "path": to_log_path(ctx.output_dir, Path(receipt.path)),
            "bytes": int(receipt.bytes),
            "sha256": str(receipt.sha256),
            "files": files,
        }
        events.append(("TrajectoryCommitted", {**committed, "duration_s": clock.lap()}))
    else:
        discard = RECORDING_DISABLED if accepted else reason
        clock.lap()
        events.append(
            ("TrajectoryDiscarded", {"batch_index": b, "episode_index": j, "reason": discard})
        )
    # Only now, with the verdict fixed and the file durable, is the environment asked to
    # return to its nominal state. ResetSubmitted records that this request was made and
    # returned; if it raised, the episode is still done (commit-or-discard) but not reset.
    del recorder
    try:
        env.reset(None)
    except BaseException as error:  # KeyboardInterrupt too: the verdict is still logged
        return EpisodeRun(events, accepted, committed, reset_error=error)
    events.append(
        ("ResetSubmitted", {"batch_index": b, "episode_index": j, "duration_s": clock.lap()})
    )
    return EpisodeRun(events, accepted, committed)


class _PhaseClock:
    """Monotonic durations of an episode's consecutive phases (wall-clock jumps ignored)."""

    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        return round(elapsed, 6)
