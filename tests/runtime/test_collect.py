"""Collection on the real demo task: the event sequence, the report, and every failure path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from domain.state import fold
from domain.task import CheckSpec
from runtime.collection import CollectionRefused, collect, default_environment_factory
from runtime.files import report_text
from runtime.seeds import episode_seed
from store.projections.collection_report import collection_report
from tests.runtime.demo_runs import prepared


def types_after(events: list[Any], kind: str) -> list[str]:
    start = next(i for i, e in enumerate(events) if e.type == kind)
    return [e.type for e in events[start:]]


class Flaky:
    """A real TaskEnvironment whose program or close can be made to fail on demand."""

    def __init__(
        self,
        inner: Any,
        *,
        fail_program_at: int | None = None,
        error: BaseException | None = None,
        close_error: BaseException | None = None,
    ) -> None:
        self.inner = inner
        self.fail_program_at = fail_program_at
        self.error = error
        self.close_error = close_error
        self.programs = 0
        self.closes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run_program(self, recorder: Any = None) -> Any:
        self.programs += 1
        if self.programs == self.fail_program_at:
            assert self.error is not None
            raise self.error
        return self.inner.run_program(recorder)

    def close(self) -> None:
        self.closes += 1
        self.inner.close()
        if self.close_error is not None:
            raise self.close_error


def flaky_factory(made: list[Flaky], **options: Any) -> Any:
    def factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Flaky:
        env = Flaky(
            default_environment_factory(deployment_dir, seed=seed, settle_steps=settle_steps),
            **options,
        )
        made.append(env)
        return env

    return factory


def test_event_sequence_of_a_small_run(store: Any, tmp_path: Path, catalog: Path) -> None:
    run_id = prepared(store, tmp_path / "out", catalog)
    result = collect(run_id, store=store, progress=False)
    events = store.read(run_id)
    episode = [
        "EpisodeStarted", "InitialChecked", "EpisodeExecuted", "EpisodeJudged",
    ]
    observed = types_after(events, "CollectionStarted")
    assert observed[:4] == [
        "CollectionStarted", "EnvironmentBuilt", "BatchStarted", "AssetsReplaced"
    ]
    assert observed[-2:] == ["EnvironmentClosed", "RunCompleted"]
    assert observed.count("EnvironmentBuilt") == 1
    assert observed.count("BatchStarted") == observed.count("BatchFinished") == 2
    assert observed.count("EpisodeStarted") == observed.count("ResetSubmitted") == 4
    for i, event in enumerate(events):
        if event.type == "EpisodeStarted":
            names = [e.type for e in events[i : i + 6]]
            assert names[:4] == episode
            assert names[4] in ("TrajectoryCommitted", "TrajectoryDiscarded")
            assert names[5] == "ResetSubmitted"
            p = event.payload
            assert p["seed"] == episode_seed(7 + p["batch_index"], p["episode_index"])
    replaced = [e.payload for e in events if e.type == "AssetsReplaced"]
    assert replaced[0]["roles_replaced"] == []  # the environment was built for batch 0
    assert replaced[1]["roles_replaced"] == ["bin", "item"]
    state = fold(run_id, events)
    assert state.state == "completed"
    started = next(e.payload for e in events if e.type == "CollectionStarted")
    assert started["recording_dir"] == f"recordings/run_{started['session_id']}"
    assert started["episodes_per_batch"] == 2 and started["record_trajectory"] is True
    assert result.environment_constructions == 1
    assert [b.batch_index for b in result.batches] == [0, 1]
    assert all(b.close_finalized for b in result.batches)
    # Every committed trajectory exists under the session folder with its logged digest.
    out = tmp_path / "out"
    commits = [e.payload for e in events if e.type == "TrajectoryCommitted"]
    assert commits, "the demo run should accept some episodes"
    for receipt in commits:
        path = out / receipt["path"]
        assert path.parent.name == f"run_{started['session_id']}"
        assert path.name == f"b{receipt['batch_index']:04d}_e{receipt['episode_index']:04d}.pt"
        assert path.stat().st_size == receipt["bytes"]
    accepted = {(b.batch_index, e.episode_index) for b in result.batches for e in b.episodes
                if e.accepted}
    assert accepted == {(r["batch_index"], r["episode_index"]) for r in commits}


def test_report_json_is_the_projection_of_the_log(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1)
    result = collect(run_id, store=store, progress=False)
    text = result.report_path.read_text(encoding="utf-8")
    assert text == report_text(collection_report(store.read(run_id)))
    report = json.loads(text)
    assert report["status"] == "completed"
    assert report["schema_version"] == 1
    assert report["environment_constructions"] == 1
    batch = report["batches"][0]
    assert set(batch) >= {"batch_index", "asset_set_id", "episodes", "close_finalized"}
    assert set(batch["episodes"][0]) >= {
        "episode_index", "accepted", "reset_submitted", "validation"
    }


def test_env_raising_mid_episode_fails_the_run_and_keeps_the_error(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog)
    made: list[Flaky] = []
    boom = RuntimeError("actuator exploded")
    with pytest.raises(RuntimeError, match="actuator exploded") as caught:
        collect(
            run_id,
            store=store,
            environment_factory=flaky_factory(made, fail_program_at=3, error=boom),
            progress=False,
        )
    assert caught.value is boom
    assert len(made) == 1 and made[0].closes == 1
    events = store.read(run_id)
    closed, failed = events[-2], events[-1]
    assert closed.type == "EnvironmentClosed" and closed.payload["ok"] is True
    assert failed.type == "RunFailed"
    assert failed.payload["phase"] == "episode"
    assert failed.payload["error_type"] == "RuntimeError"
    assert failed.payload["detail"] == "actuator exploded"
    assert "actuator exploded" in failed.payload["traceback"]
    # The third program run is episode 0 of batch 1 (batch 0 has episodes 0 and 1).
    assert (failed.payload["batch_index"], failed.payload["episode_index"]) == (1, 0)
    assert store.state(run_id).state == "failed"
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["status"] == "failed" and report["error_type"] == "RuntimeError"
    assert report["batch_index"] == 1 and report["episode_index"] == 0


def test_close_failure_is_a_note_on_the_original_error(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1)
    made: list[Flaky] = []
    boom = ValueError("bad grasp")
    factory = flaky_factory(
        made, fail_program_at=1, error=boom, close_error=OSError("device busy")
    )
    with pytest.raises(ValueError, match="bad grasp") as caught:
        collect(run_id, store=store, environment_factory=factory, progress=False)
    assert caught.value is boom
    assert any("Environment close also failed" in n and "device busy" in n
               for n in caught.value.__notes__)
    events = store.read(run_id)
    closed = next(e.payload for e in events if e.type == "EnvironmentClosed")
    assert closed["ok"] is False
    assert closed["error_type"] == "OSError" and closed["detail"] == "device busy"
    assert events[-1].type == "RunFailed" and events[-1].payload["error_type"] == "ValueError"


def test_close_failure_after_all_batches_fails_the_run(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    closing = OSError("cannot release the GL context")
    factory = flaky_factory([], close_error=closing)
    with pytest.raises(OSError) as caught:
        collect(run_id, store=store, environment_factory=factory, progress=False)
    assert caught.value is closing
    events = store.read(run_id)
    assert [e.type for e in events[-2:]] == ["EnvironmentClosed", "RunFailed"]
    assert events[-2].payload["ok"] is False
    assert events[-1].payload["phase"] == "close_environment"


def test_custom_factory_is_called_once_for_the_first_deployment(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=3, episodes_per_batch=1)
    calls: list[tuple[Path, int, int]] = []

    def factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
        calls.append((Path(deployment_dir), seed, settle_steps))
        return default_environment_factory(deployment_dir, seed=seed, settle_steps=settle_steps)

    result = collect(run_id, store=store, environment_factory=factory, progress=False)
    assert calls == [(tmp_path / "out" / "batch_0000", 7, 10)]
    assert len(result.batches) == 3 and result.environment_constructions == 1


def test_keyboard_interrupt_is_a_recorded_failure(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1)
    interrupt = KeyboardInterrupt()
    factory = flaky_factory([], fail_program_at=2, error=interrupt)
    with pytest.raises(KeyboardInterrupt) as caught:
        collect(run_id, store=store, environment_factory=factory, progress=False)
    assert caught.value is interrupt
    failed = store.read(run_id)[-1]
    assert failed.type == "RunFailed"
    assert failed.payload["error_type"] == "KeyboardInterrupt"
    assert (failed.payload["phase"], failed.payload["batch_index"]) == ("episode", 0)
    assert failed.payload["episode_index"] == 1
    assert store.state(run_id).failed_from == "collecting"


def test_recording_disabled_discards_accepted_episodes(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, record_trajectory=False, seed=8, batches=1)
    result = collect(run_id, store=store, progress=False)
    assert result.accepted > 0
    events = store.read(run_id)
    assert not [e for e in events if e.type == "TrajectoryCommitted"]
    started = next(e.payload for e in events if e.type == "CollectionStarted")
    assert started["record_trajectory"] is False and started["recording_dir"] is None
    judged = {
        (e.payload["batch_index"], e.payload["episode_index"]): e.payload["accepted"]
        for e in events if e.type == "EpisodeJudged"
    }
    for e in events:
        if e.type == "TrajectoryDiscarded" and judged[
            (e.payload["batch_index"], e.payload["episode_index"])
        ]:
            assert e.payload["reason"] == "recording_disabled"
    assert not (tmp_path / "out" / "recordings").exists()


def test_custom_checks_replace_the_task_checks(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1, seed=8)
    collect(
        run_id,
        store=store,
        initial_checks=[CheckSpec("at_rest")],
        final_checks=(CheckSpec("at_rest"),),
        progress=False,
    )
    events = store.read(run_id)
    initial = next(e.payload for e in events if e.type == "InitialChecked")
    assert [c["name"] for c in initial["checks"]] == ["at_rest"]


def test_episodes_per_batch_override(store: Any, tmp_path: Path, catalog: Path) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=3)
    result = collect(run_id, store=store, episodes_per_batch=1, progress=False)
    assert [len(b.episodes) for b in result.batches] == [1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial_checks": ["at_rest"]}, r"initial_checks\[0\] must be a CheckSpec, got str"),
        ({"final_checks": "at_rest"}, "final_checks must be a sequence of CheckSpec"),
        ({"episodes_per_batch": 0}, r"episodes_per_batch must be an integer in \[1, 1000000\]"),
    ],
)
def test_bad_arguments_are_refused_before_any_event(
    store: Any, tmp_path: Path, catalog: Path, kwargs: dict[str, Any], message: str
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    version = store.state(run_id).version
    with pytest.raises(CollectionRefused, match=message):
        collect(run_id, store=store, progress=False, **kwargs)
    assert store.state(run_id).version == version
    # The lease was released: a correct call goes through.
    collect(run_id, store=store, progress=False)


def test_collect_refuses_a_run_that_is_not_prepared(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    collect(run_id, store=store, progress=False)
    with pytest.raises(CollectionRefused, match=rf"run {run_id} is completed, not prepared"):
        collect(run_id, store=store, progress=False)


class _Terminal:
    """A stderr stand-in that claims to be a terminal and keeps what was written."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal(
    store: Any, tmp_path: Path, catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    run_id = prepared(store, tmp_path / "out", catalog, batches=1)
    collect(run_id, store=store, progress=True)
    shown = "".join(terminal.parts)
    assert f"collect {run_id}" in shown and "2/2" in shown and "accepted=" in shown
    terminal.parts.clear()
    other = prepared(store, tmp_path / "quiet", catalog, batches=1, episodes_per_batch=1)
    collect(other, store=store, progress=False)
    assert f"collect {other}" not in "".join(terminal.parts)


def test_reset_submitted_follows_a_real_nominal_reset(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    run_id = prepared(store, tmp_path / "out", catalog)
    calls: list[str] = []

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def reset(self, seed: int | None) -> None:
            calls.append("reset(None)" if seed is None else "reset(seed)")
            self.inner.reset(seed)

    def factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
        return Counting(default_environment_factory(
            deployment_dir, seed=seed, settle_steps=settle_steps
        ))

    collect(run_id, store=store, environment_factory=factory, progress=False)
    assert calls == ["reset(seed)", "reset(None)"] * 4
    resets = [e for e in store.read(run_id) if e.type == "ResetSubmitted"]
    assert len(resets) == calls.count("reset(None)")


def test_collect_refuses_an_altered_log_before_taking_the_lease(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    """The Python API checks the chain like the CLI and resume do: nothing is appended."""
    from domain.chain import ChainBroken

    run_id = prepared(store, tmp_path / "out", catalog, batches=1, episodes_per_batch=1)
    version = store.state(run_id).version
    rows = store._events[run_id]
    row = list(rows[1])
    assert row[2] == "PreparationStarted"
    row[3] = row[3].replace('"pid":', '"pid": ')  # same payload, other bytes
    rows[1] = tuple(row)
    with pytest.raises(ChainBroken) as refused:
        collect(run_id, store=store, progress=False)
    assert str(refused.value) == (
        f"run {run_id}: hash chain broken: seq 2 (PreparationStarted) differs from what was "
        "recorded: its content no longer matches its hash; refusing to continue a run whose "
        "log was altered (see `assetcast verify`)"
    )
    assert len(store._events[run_id]) == version
    assert store.lease_info(run_id) is None
