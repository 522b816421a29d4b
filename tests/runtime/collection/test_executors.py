"""The executor interface without Ray: the in-process executor's report order and failure
placement, and the refusals of --workers / --ray-address (exit 2, nothing recorded)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from runtime.cli import main
from runtime.collection.demo_run import gantry_demo_task_text
from runtime.collection.executors import (
    BatchDone,
    BatchOpened,
    BatchWork,
    EpisodeDone,
    LocalExecutor,
    WorkSettings,
)
from runtime.collection.executors.options import ExecutorOptions
from runtime.collection.plan import CollectionRefused
from store.event_store import EventStore
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)


@pytest.mark.parametrize(
    ("workers", "address", "message"),
    [
        (0, None, "--workers: must be an integer in [1, 4096], got 0"),
        (5000, None, "--workers: must be an integer in [1, 4096], got 5000"),
        (True, None, "--workers: must be an integer in [1, 4096], got True"),
        (1, "  ", "--ray-address: must be a non-empty address (host:port)"),
    ],
)
def test_bad_executor_options_are_refused_by_flag(
    workers: Any, address: str | None, message: str
) -> None:
    with pytest.raises(CollectionRefused) as refused:
        ExecutorOptions(workers, address).check()
    assert str(refused.value) == message


@pytest.mark.parametrize("deadline", [0, -1.0, float("nan"), float("inf"), True, "5"])
def test_a_bad_episode_deadline_is_refused_by_flag(deadline: Any) -> None:
    with pytest.raises(CollectionRefused) as refused:
        ExecutorOptions(2, None, deadline).check()
    assert str(refused.value) == (
        f"--episode-deadline: must be a number of seconds > 0, got {deadline!r}"
    )
    assert ExecutorOptions(2, None, 0.5).check().episode_deadline_s == 0.5


def test_several_workers_without_ray_installed_name_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(CollectionRefused) as refused:
        ExecutorOptions(2).check()
    assert str(refused.value) == (
        "--workers: collection on several workers needs Ray; install it with: "
        "pip install 'assetcast[ray]'"
    )
    assert ExecutorOptions(1).check().uses_ray is False  # the default never needs Ray


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", "0"], "--workers: must be an integer in [1, 4096], got 0"),
        (["--workers", "2", "--episode-deadline", "0"],
         "--episode-deadline: must be a number of seconds > 0, got 0.0"),
    ],
)
def test_run_with_bad_workers_records_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    task = tmp_path / "task.yaml"
    task.write_text(gantry_demo_task_text(), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'a.db'}"
    code = main(["run", str(task), "--catalog", f"item={tmp_path}", "--catalog",
                 f"bin={tmp_path}", "--out", str(tmp_path / "o"), "--db", url, *flags])
    assert code == 2
    assert capsys.readouterr().err == f"assetcast: error: {message}\n"
    assert not (tmp_path / "o").exists()
    assert not (tmp_path / "a.db").exists() or EventStore(url).list_runs() == []


class _Env:
    constructions = 1

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def reset(self, seed: int | None) -> None:
        self.log.append(f"reset {seed is not None}")

    def replace_assets(self, path: Path) -> Any:
        self.log.append("replace")
        return type("Info", (), {"roles_replaced": ("item",), "entities_kept": ("bin",)})()

    def run_checks(self, specs: Any) -> tuple:
        from runtime.sim.results import CheckResult

        return (CheckResult("ok", "passed", "", {}),)

    def run_program(self, recorder: Any) -> Any:
        if self.log.count("replace") and self.log[-1] == "reset True":
            raise RuntimeError("the program broke")
        return type("P", (), {"completed": True, "steps": 1, "skills": (), "detail": ""})()

    def close(self) -> None:
        self.log.append("close")


def test_local_executor_reports_each_batch_in_order_and_places_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 0 runs; batch 1 (assets replaced on the same environment) fails in its first
    episode, and ``where`` names that episode."""
    from runtime.collection.executors import worker as worker_module

    log: list[str] = []
    settings = WorkSettings(lambda *a, **k: _Env(log), 0, False, (), ())

    class Deployment:
        def __init__(self, path: Path) -> None:
            self.path, self.task_path = path, path / "task.yaml"
            self.manifest_sha256, self.manifest = "m", {"roles": {}}

    monkeypatch.setattr(worker_module.BatchWorker, "deployment", lambda self, w: Deployment(
        w.deployment_path
    ))
    monkeypatch.setattr(
        "runtime.taskfile.load_task",
        lambda path: type("T", (), {
            "scene": type("S", (), {"entities": ()})(), "cameras": (), "task_id": "t",
            "checks": type("C", (), {"initial": (), "final": ()})(),
        })(),
    )
    executor = LocalExecutor(settings)
    works = [BatchWork(b, f"set{b}", b, tmp_path, "m", (0, 1)) for b in (0, 1)]
    reports = []
    with pytest.raises(RuntimeError, match="the program broke"):
        for report in executor.run(works):
            reports.append(report)
    kinds = [(type(r).__name__, getattr(r, "batch_index", None)) for r in reports]
    assert kinds == [
        ("BatchOpened", 0), ("EpisodeDone", None), ("EpisodeDone", None), ("BatchDone", 0),
        ("BatchOpened", 1),
    ]
    assert isinstance(reports[0], BatchOpened) and reports[0].built
    assert not reports[4].built and reports[4].roles_replaced == ("item",)
    assert [r.run.episode_index for r in reports if isinstance(r, EpisodeDone)] == [0, 1]
    assert isinstance(reports[3], BatchDone)
    assert executor.where is not None
    assert (executor.where.phase, executor.where.batch_index, executor.where.episode_index) == (
        "episode", 1, 0
    )
    assert executor.built
    executor.close()
    assert not executor.built and log[-1] == "close"
