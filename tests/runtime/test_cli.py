"""The command line, in process: exit codes, one-line errors, queries on a real small run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.collection.demo_run import gantry_demo_task_text as demo_task_text
from store.event_store import EventStore
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("catalog")
    assert main(["catalog", "demo", str(directory)]) == 0
    return directory


@pytest.fixture()
def task(tmp_path: Path) -> Path:
    path = tmp_path / "task.yaml"
    path.write_text(demo_task_text(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory, catalog: Path) -> dict:
    """One real `run` (1 batch x 1 episode) shared by the query tests."""
    base = tmp_path_factory.mktemp("run")
    task = base / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    url = f"sqlite:///{base / 'assetcast.db'}"
    code = main(
        [
            "run", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
            "--out", str(base / "out"), "--seed", "10", "--db", url, "--no-progress",
            "--log-level", "warning",
        ]
    )
    assert code == 0
    [summary] = EventStore(url).list_runs()
    return {"url": url, "run_id": summary.run_id, "out": base / "out"}


def _no_runs(url: str) -> bool:
    return EventStore(url).list_runs() == []


def _bad(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == f"assetcast: error: {message}\n"


# --------------------------------------------------------------------------- bad input (exit 2)


def test_queries_do_not_create_a_missing_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.db"
    url = f"sqlite:///{missing}"
    for command in (["runs"], ["show", "r"], ["audit"], ["resume", "r"], ["db", "current"]):
        assert main([*command, "--db", url]) == 2
        assert capsys.readouterr().err.startswith(
            f"assetcast: error: database {url}: no database file at "
        )
    assert not missing.exists()


def test_unknown_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert main(["db", "upgrade", "--db", url]) == 0
    for command in (["show", "nope"], ["events", "nope"], ["verify", "nope"], ["collect", "nope"]):
        _bad(
            capsys,
            [*command, "--db", url],
            "unknown run 'nope' (use `assetcast runs` to list runs)",
        )
    assert _no_runs(url)


def test_bad_catalog_argument(
    tmp_path: Path, task: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    out = str(tmp_path / "out")
    _bad(
        capsys,
        ["prepare", str(task), "--catalog", str(catalog), "--out", out, "--db", url],
        f"--catalog {str(catalog)!r}: expected ROLE=DIR",
    )
    _bad(
        capsys,
        ["prepare", str(task), "--catalog", "item=/no/such/dir", "--out", out, "--db", url],
        "--catalog 'item=/no/such/dir': /no/such/dir is not a directory",
    )
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "a.db").exists() or _no_runs(url)


def test_missing_task_file(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.yaml"
    url = f"sqlite:///{tmp_path / 'a.db'}"
    _bad(
        capsys,
        ["run", str(missing), "--catalog", f"item={catalog}", "--out", str(tmp_path / "o"),
         "--db", url],
        f"{missing}: task file not found",
    )
    assert not (tmp_path / "a.db").exists()


def test_unknown_key_in_task(
    tmp_path: Path, task: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task.write_text(task.read_text() + "colour: red\n")
    url = f"sqlite:///{tmp_path / 'a.db'}"
    _bad(
        capsys,
        ["prepare", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
         "--out", str(tmp_path / "o"), "--db", url],
        f"{task}: colour: unknown key",
    )
    assert not (tmp_path / "a.db").exists()


def test_argparse_and_flag_values_are_one_line(
    tmp_path: Path, task: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _bad(capsys, ["prepare", str(task), "--out", "o", "--catalog", "a=b", "--batches", "x"],
         "argument --batches: invalid int value: 'x'")
    _bad(capsys, ["prepare", str(task), "--out", "o", "--catalog", "a=b", "--batches", "0"],
         "--batches: must be an integer in [1, 1000000], got 0")
    _bad(capsys, ["frobnicate"],
         "argument COMMAND: invalid choice: 'frobnicate' (choose from 'demo', 'catalog', "
         "'prepare', 'collect', 'run', 'resume', 'runs', 'show', 'events', 'audit', "
         "'forensics', 'verify', 'report', 'export', 'verify-dataset', 'episode', 'db')")
    _bad(capsys, ["prepare", str(task)], "the following arguments are required: --catalog, --out")


def test_catalog_check_reports_a_broken_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "cat"
    assert main(["catalog", "demo", str(directory)]) == 0
    broken = directory / "block-040"
    manifest = json.loads((broken / "asset.catalog.json").read_text())
    manifest["descriptor"]["bounds_m"]["upper"][2] = 0.5  # no longer the mesh's bounds
    (broken / "asset.catalog.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["catalog", "check", str(directory), "--log-level", "warning"]) == 2
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 27
    [failed] = [line for line in lines if line.startswith("FAIL")]
    assert failed.startswith(f"FAIL  {broken}: ")
    assert "bounds" in failed
    assert sum(line.startswith("ok    ") for line in lines) == 26
    assert captured.err == "assetcast: error: 1 of 27 package(s) failed\n"


# --------------------------------------------------------------------------- a real small run


def test_runs_lists_the_run(small_run: dict, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["runs", "--db", small_run["url"]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "task", "state", "batches", "accepted", "last", "event"]
    [row] = lines[2:]
    cells = row.split()
    assert cells[:4] == [small_run["run_id"], "place_item_in_bin", "completed", "1/1"]
    assert cells[4] in ("0/1", "1/1")


def test_show_json_is_byte_identical_to_report(
    small_run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["show", small_run["run_id"], "--json", "--db", small_run["url"]]) == 0
    printed = capsys.readouterr().out
    assert printed == (small_run["out"] / "report.json").read_text(encoding="utf-8")
    assert main(["show", small_run["run_id"], "--db", small_run["url"]]) == 0
    human = capsys.readouterr().out
    assert "state:      completed" in human
    assert "bin=bin-180x140 item=block-060x040x030" in human


def test_events_filter_and_json(small_run: dict, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    argv = ["events", small_run["run_id"], "--db", small_run["url"]]
    assert main([*argv, "--type", "RunCreated,RunCompleted", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["type"] for r in records] == ["RunCreated", "RunCompleted"]
    assert records[0]["seq"] == 1 and records[0]["payload"]["goal"] == "run"
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "1" and lines[0].split()[2] == "RunCreated"
    _bad(capsys, [*argv, "--type", "Nope"], "--type: unknown event type(s) Nope")


def test_audit_and_forensics_json(small_run: dict, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["audit", "--json", "--db", small_run["url"]]) == 0
    report = json.loads(capsys.readouterr().out)
    used = {a["asset_id"] for a in report["assets"] if a["runs"]}
    assert used == {"bin-180x140", "block-060x040x030"}
    assert main(["forensics", small_run["run_id"], "--json", "--db", small_run["url"]]) == 0
    forensic = json.loads(capsys.readouterr().out)
    assert forensic["state"] == "completed"
    assert forensic["crashed_sessions"] == [] and forensic["interrupted_episode"] is None


def test_verify_detects_a_tampered_trajectory(
    small_run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    argv = ["verify", small_run["run_id"], "--db", small_run["url"], "--log-json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"run {small_run['run_id']}: ok (chain of " in captured.out
    assert "; 1 trajectories, 1 deployments, " in captured.out
    # --log-json: every stderr line is a JSON object
    logged = [json.loads(line) for line in captured.err.splitlines()]
    assert any(record["event"] == "run_verified" for record in logged)
    [trajectory] = sorted((small_run["out"] / "recordings").rglob("*.pt"))
    original = trajectory.read_bytes()
    try:
        trajectory.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        assert main(argv) == 1
        out = capsys.readouterr().out
        assert f"trajectory {trajectory} sha256" in out
        assert "1 problem(s)" in out
    finally:
        trajectory.write_bytes(original)


def test_failed_preparation_exits_1_and_is_recorded(
    tmp_path: Path, task: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task.write_text(task.read_text().replace("max_extent_m: 0.12", "max_extent_m: 0.01"))
    url = f"sqlite:///{tmp_path / 'a.db'}"
    code = main(
        ["prepare", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
         "--out", str(tmp_path / "o"), "--db", url, "--log-level", "error"]
    )
    assert code == 1
    err = capsys.readouterr().err.splitlines()
    [run] = EventStore(url).list_runs()
    assert run.state == "failed"
    assert err[0].startswith(f"assetcast: run {run.run_id} failed: PreparationFailed: ")


def test_interrupt_exits_130_after_the_run_recorded_it(
    tmp_path: Path,
    task: Path,
    catalog: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runtime.collection

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runtime.collection, "collect", interrupted)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    code = main(
        ["run", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
         "--out", str(tmp_path / "o"), "--db", url, "--log-level", "error"]
    )
    assert code == 130
    [run] = EventStore(url).list_runs()
    assert run.state == "prepared"
    assert capsys.readouterr().err == (
        f"assetcast: interrupted; `assetcast resume {run.run_id}` continues\n"
    )
