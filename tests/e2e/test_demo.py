"""`assetcast demo` end to end in a subprocess, as a user runs it (1 batch x 1 episode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.demo import ROOT_MARKER

REPO = Path(__file__).resolve().parents[2]


def assetcast(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ASSETCAST_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "runtime", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


def test_demo_one_batch_one_episode(tmp_path: Path) -> None:
    done = assetcast(
        "--log-json", "demo", "--out", "demo", "--batches", "1", "--episodes-per-batch", "1",
        "--no-progress", cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    for line in done.stderr.splitlines():  # --log-json: only JSON lines on stderr
        assert isinstance(json.loads(line), dict)
    lines = done.stdout.splitlines()
    run_id = lines[0].split()[2]
    [folder] = sorted((tmp_path / "demo").glob("demo-*"))
    assert lines[0] == f"demo run {run_id} in {folder}"
    assert (tmp_path / "demo" / ROOT_MARKER).is_file()
    header = lines[2].split()
    assert header[:3] == ["batch", "asset", "set"]
    row = lines[4].split()
    assert row[0] == "0" and row[1].startswith("bin=") and row[2].startswith("item=")
    assert row[3] in ("1/1", "0/1")
    for name in ("catalog", "task.yaml", "assetcast.db", "run/report.json", "run/batch_0000"):
        assert (folder / name).exists(), name
    if row[3] == "1/1":
        assert len(list((folder / "run" / "recordings").rglob("*.pt"))) == 1

    url = f"sqlite:///{folder / 'assetcast.db'}"
    shown = assetcast("show", run_id, "--json", "--db", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (folder / "run" / "report.json").read_text(encoding="utf-8")
    verified = assetcast("verify", run_id, "--db", url, cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout


def test_demo_refuses_a_foreign_non_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["demo", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"assetcast: error: --out {tmp_path}: folder is not empty and is not an assetcast "
        f"demo folder (no {ROOT_MARKER}); choose another --out\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
