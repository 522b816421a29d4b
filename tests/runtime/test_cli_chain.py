"""The hash chain from the command line: show prints the head, verify names the first place
an attacked log or file differs, reading commands warn first, resume refuses (exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from runtime.cli import main
from runtime.demo import demo_task_text
from store.event_store import EventStore
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)


@pytest.fixture(scope="module")
def prepared_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A `run` interrupted after preparing (resumable), its database kept as a pristine copy."""
    import runtime.collection

    base = tmp_path_factory.mktemp("chainrun")
    assert main(["catalog", "demo", str(base / "catalog"), "--log-level", "error"]) == 0
    task = base / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    url = f"sqlite:///{base / 'pristine.db'}"
    original = runtime.collection.collect

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    runtime.collection.collect = interrupted  # type: ignore[assignment]
    try:
        code = main([
            "run", str(task), "--catalog", f"item={base / 'catalog'}", "--catalog",
            f"bin={base / 'catalog'}", "--out", str(base / "out"), "--seed", "10", "--db", url,
            "--log-level", "error",
        ])
    finally:
        runtime.collection.collect = original  # type: ignore[assignment]
    assert code == 130
    [run] = EventStore(url).list_runs()
    assert run.state == "prepared"
    return {"db": base / "pristine.db", "run_id": run.run_id, "out": base / "out"}


@pytest.fixture()
def run(prepared_run: dict, tmp_path: Path) -> dict:
    db = tmp_path / "attacked.db"
    for suffix in ("", "-wal"):
        source = Path(f"{prepared_run['db']}{suffix}")
        if source.exists():
            shutil.copyfile(source, f"{db}{suffix}")
    return {**prepared_run, "url": f"sqlite:///{db}"}


def _sql(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def _untrigger(url: str, *statements: str) -> None:
    _sql(url, "DROP TRIGGER events_no_update", "DROP TRIGGER events_no_delete", *statements)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv, "--log-level", "error"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_prints_the_head_and_verify_accepts_it(
    run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    head = EventStore(run["url"]).head_hash(run["run_id"])
    code, out, err = _cli(capsys, "show", run["run_id"], "--db", run["url"])
    assert code == 0 and err == "", err
    assert f"head hash:  {head}\n" in out
    code, out, _ = _cli(capsys, "verify", run["run_id"], "--head", head, "--db", run["url"])
    assert code == 0, out
    assert out.splitlines()[-1].startswith(f"run {run['run_id']}: ok (chain of ")
    assert f"head {head};" in out
    code, out, _ = _cli(capsys, "verify", "--all", "--db", run["url"])
    assert code == 0 and f"run {run['run_id']}: ok" in out


def test_bad_head_argument_is_bad_input(run: dict, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "verify", run["run_id"], "--head", "xyz", "--db", run["url"])
    assert code == 2
    assert err == "assetcast: error: --head 'xyz': expected 64 hexadecimal characters\n"


def test_changed_payload_is_named_warned_first_and_resume_refuses(
    run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, url = run["run_id"], run["url"]
    _untrigger(url, "UPDATE events SET payload = REPLACE(payload, 'batch_0000', 'batch_0009') "
               "WHERE type = 'DeploymentMaterialized'")
    seq = EventStore(url).verify_chain(run_id).problem_seq
    assert seq is not None
    problem = (f"seq {seq} (DeploymentMaterialized) differs from what was recorded: its "
               "content no longer matches its hash")
    code, out, _ = _cli(capsys, "verify", run_id, "--db", url)
    assert code == 1
    assert out.splitlines()[0] == f"problem: hash chain: {problem}"
    for command in (["show", run_id], ["events", run_id], ["forensics", run_id], ["runs"]):
        code, _, err = _cli(capsys, *command, "--db", url)
        assert err.splitlines()[0] == (
            f"assetcast: warning: run {run_id}: hash chain broken: {problem}"
        ), command
    version = EventStore(url).list_runs()[0].version
    code, out, err = _cli(capsys, "resume", run_id, "--db", url)
    assert code == 2 and out == ""
    assert err == (
        f"assetcast: error: run {run_id}: hash chain broken: {problem}; refusing to continue "
        "a run whose log was altered (see `assetcast verify`)\n"
    )
    assert EventStore(url).list_runs()[0].version == version  # nothing recorded


def test_deleted_and_swapped_events_are_named(
    run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, url = run["run_id"], run["url"]
    _untrigger(url, "DELETE FROM events WHERE seq = 3")
    code, out, _ = _cli(capsys, "verify", run_id, "--db", url)
    assert code == 1
    assert "problem: hash chain: seq 3 is missing (the log goes from seq 2 to seq 4)" in out
    code, _, err = _cli(capsys, "resume", run_id, "--db", url)
    assert code == 2 and "seq 3 is missing" in err and len(err.splitlines()) == 1


def test_swapped_events_are_named(run: dict, capsys: pytest.CaptureFixture[str]) -> None:
    run_id, url = run["run_id"], run["url"]
    _untrigger(
        url, "UPDATE events SET seq = -1 WHERE seq = 4", "UPDATE events SET seq = 4 WHERE seq = 5",
        "UPDATE events SET seq = 5 WHERE seq = -1",
    )
    code, out, _ = _cli(capsys, "verify", run_id, "--db", url)
    assert code == 1
    assert "problem: hash chain: events reordered: the event now at seq 4 (" in out
    assert "was recorded as seq 5" in out


def test_truncated_tail_with_rewound_run_row_is_caught_by_the_noted_head(
    run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, url = run["run_id"], run["url"]
    store = EventStore(url)
    noted = store.head_hash(run_id)
    version = store.list_runs()[0].version
    store.close()
    _untrigger(
        url, f"DELETE FROM events WHERE seq = {version}",
        f"UPDATE runs SET version = {version - 1}, head_hash = "
        f"(SELECT hash FROM events WHERE seq = {version - 1})",
    )
    code, out, _ = _cli(capsys, "verify", run_id, "--db", url)
    assert code == 0  # without the noted head, a consistent shorter log is all there is
    code, out, _ = _cli(capsys, "verify", run_id, "--head", noted, "--db", url)
    assert code == 1
    assert f"problem: hash chain: the noted head {noted} is not in this run's chain" in out


@pytest.fixture()
def restored_out(run: dict, tmp_path: Path):
    backup = tmp_path / "out-backup"
    shutil.copytree(run["out"], backup)
    yield run
    shutil.rmtree(run["out"])
    shutil.copytree(backup, run["out"])


def test_changed_deployment_file_is_named_and_resume_refuses(
    restored_out: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    run = restored_out
    task = run["out"] / "batch_0000" / "task.yaml"
    task.write_text(task.read_text() + "# edited\n")
    code, out, _ = _cli(capsys, "verify", run["run_id"], "--db", run["url"])
    assert code == 1
    assert f"problem: batch 0: {task.resolve()}: SHA-256 differs from the manifest" in out
    code, out, err = _cli(capsys, "resume", run["run_id"], "--db", run["url"])
    assert code == 2
    assert err == (
        f"assetcast: error: run {run['run_id']}: batch 0: {task.resolve()}: SHA-256 differs "
        "from the manifest; refusing to resume (see `assetcast verify`)\n"
    )


def test_changed_cache_snapshot_is_named_and_resume_refuses(
    restored_out: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    run = restored_out
    store = EventStore(run["url"])
    sha = next(
        e.payload["content_sha256"] for e in store.read(run["run_id"])
        if e.type == "CandidatePrepared"
    )
    catalog = run["out"] / "cache" / sha / "asset.catalog.json"
    catalog.write_bytes(catalog.read_bytes() + b" ")
    code, out, _ = _cli(capsys, "verify", run["run_id"], "--db", run["url"])
    assert code == 1
    assert f"problem: cache snapshot {sha[:12]}: {catalog}: content does not match" in out
    code, _, err = _cli(capsys, "resume", run["run_id"], "--db", run["url"])
    assert code == 2 and f"cache snapshot {sha[:12]}" in err and len(err.splitlines()) == 1
