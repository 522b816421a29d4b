"""A worker that hangs (alive, never answering) past the episode deadline is killed and its
unfinished episodes re-dispatched as for a dead worker: the run completes with the results
of one in-process worker and the hung episode is logged once."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from runtime.collection import collect
from runtime.collection.environment import default_environment_factory
from tests.executors.ray_inner.conftest import (
    assert_logged_once_and_legal,
    prepared_run,
    results,
)

HANG_AT_PROGRAM = 2  # the first environment to run its 2nd program hangs there


class _HangingEnvironment:
    """The real environment, except that one program (once in the whole run) never ends."""

    def __init__(self, env: Any, marker: Path) -> None:
        self.env, self.marker, self.programs = env, marker, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def run_program(self, recorder: Any) -> Any:
        self.programs += 1
        if self.programs == HANG_AT_PROGRAM:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass  # another worker already hung: this one runs normally
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                time.sleep(3600)
        return self.env.run_program(recorder)


class _HangOnceFactory:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __call__(self, deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
        env = default_environment_factory(deployment_dir, seed=seed, settle_steps=settle_steps)
        return _HangingEnvironment(env, self.marker)


def test_a_hung_worker_is_killed_at_the_deadline_and_its_episodes_rerun_once(
    ray_local: str, reference: dict, catalog: Path, tmp_path: Path
) -> None:
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers can't import tests
    marker = tmp_path / "hung.pid"
    store, run_id, out = prepared_run(tmp_path / "run", catalog)
    started = time.monotonic()
    collect(
        run_id, store=store, progress=False, workers=2,
        environment_factory=_HangOnceFactory(marker), episode_deadline_s=20.0,
    )
    assert marker.exists(), "no worker hung"
    hung_pid = int(marker.read_text())
    assert not Path(f"/proc/{hung_pid}").exists(), "the hung worker was not killed"
    assert time.monotonic() - started < 600
    assert results(store, run_id) == reference
    assert_logged_once_and_legal(store, run_id, out)
    starts: dict[int, list[str]] = {}
    for event in store.read(run_id):
        if event.type == "BatchStarted":
            starts.setdefault(event.payload["batch_index"], []).append(event.payload["worker"])
    reopened = {b: w for b, w in starts.items() if len(w) > 1}
    assert len(reopened) == 1, starts  # the hung batch's rest went to another worker
    [(hung_on, again_on)] = reopened.values()
    assert hung_on != again_on
