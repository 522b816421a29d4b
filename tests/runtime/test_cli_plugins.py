"""--plugin: the user's module registers a check that the task file names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.collection.demo_run import gantry_demo_task_text as demo_task_text

REPO = Path(__file__).resolve().parents[2]
PLUGIN = '''
from runtime.sim import CheckResult, register_check

def bin_not_moved(env, spec):
    pos, _ = env.entity_pose("bin")
    moved = float(abs(pos[1] - 0.15))
    status = "passed" if moved < 0.05 else "failed"
    return CheckResult("bin_not_moved", status, "", {"moved_m": moved})

register_check("bin_not_moved", bin_not_moved)
'''


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", "--log-level", "warning", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "my_checks.py").write_text(PLUGIN, encoding="utf-8")
    task = demo_task_text().replace(
        "    - {check: at_rest}\n", "    - {check: at_rest}\n    - {check: bin_not_moved}\n", 1
    )
    assert "bin_not_moved" in task
    (tmp_path / "task.yaml").write_text(task, encoding="utf-8")
    assert _cli(tmp_path, "catalog", "demo", "cat").returncode == 0
    return tmp_path


def test_unregistered_check_is_refused_before_anything_is_recorded(workdir: Path) -> None:
    done = _cli(
        workdir, "run", "task.yaml", "--catalog", "item=cat", "--catalog", "bin=cat",
        "--out", "out", "--seed", "10", "--no-progress",
    )
    assert done.returncode == 2
    assert done.stderr == (
        "assetcast: error: task.yaml: the task uses check 'bin_not_moved', not registered in "
        "this process; import the module that registers them (--plugin MODULE)\n"
    )
    assert not (workdir / "assetcast.db").exists() and not (workdir / "out").exists()
    refused = _cli(
        workdir, "prepare", "task.yaml", "--catalog", "item=cat", "--catalog", "bin=cat",
        "--out", "out",
    )
    assert (refused.returncode, refused.stderr) == (2, done.stderr)
    assert not (workdir / "assetcast.db").exists() and not (workdir / "out").exists()


def test_plugin_check_judges_episodes(workdir: Path) -> None:
    done = _cli(
        workdir, "--plugin", "my_checks", "run", "task.yaml", "--catalog", "item=cat",
        "--catalog", "bin=cat", "--out", "out", "--seed", "10", "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((workdir / "out" / "report.json").read_text(encoding="utf-8"))
    [episode] = report["batches"][0]["episodes"]
    checks = {c["name"]: c for c in episode["validation"]["final_checks"]}
    assert checks["bin_not_moved"]["status"] == "passed"
    assert checks["bin_not_moved"]["metrics"]["moved_m"] < 0.05
    assert episode["accepted"] is True


def test_collect_of_a_prepared_run_refuses_without_the_plugin(workdir: Path) -> None:
    prepared = _cli(
        workdir, "--plugin", "my_checks", "prepare", "task.yaml", "--catalog", "item=cat",
        "--catalog", "bin=cat", "--out", "out", "--seed", "10",
    )
    assert prepared.returncode == 0, prepared.stderr
    run_id = prepared.stdout.split()[1].rstrip(":")
    refused = _cli(workdir, "collect", run_id, "--no-progress")
    assert refused.returncode == 2
    assert "check 'bin_not_moved', not registered in this process" in refused.stderr
    events = _cli(workdir, "events", run_id)
    assert "CollectionStarted" not in events.stdout
    collected = _cli(workdir, "collect", run_id, "--plugin", "my_checks", "--no-progress")
    assert collected.returncode == 0, collected.stderr
