"""`assetcast db rebuild-snapshots` and the read commands over a run whose snapshots changed."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from runtime.cli.entry_point import main
from store import EventStore
from tests.store.eventgen import legal_run


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with EventStore(url, snapshot_every=10) as store:
        store.append("r", list(legal_run("r", 2, 3)), expected_version=0)
    return url


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_rebuild_snapshots_recomputes_them_and_reads_do_not_change(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = [_run([cmd, "r", "--db", db_url], capsys) for cmd in ("show", "forensics")]
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE snapshots SET body = '{}'"))  # garbage: must be ignored
    after = [_run([cmd, "r", "--db", db_url], capsys) for cmd in ("show", "forensics")]
    assert [(code, out) for code, out, _ in after] == [(code, out) for code, out, _ in before]
    assert all("snapshot_ignored" in err for _, _, err in after)  # said, not hidden
    code, out, _ = _run(["db", "rebuild-snapshots", "--db", db_url], capsys)
    assert code == 0
    version = EventStore(db_url).state("r").version
    assert out.splitlines() == [
        f"r: snapshots at seq {version} (asset_outcomes, chain, collection_report (2 chunks),"
        " digest, fold, forensics, preparation_report, run_report (2 chunks))",
        f"{db_url}: rebuilt snapshots of 1 run(s)",
    ]
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT kind, seq FROM snapshots ORDER BY kind")).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [
        ("asset_outcomes", version), ("chain", version), ("collection_report", version),
        ("collection_report/0.0", version), ("collection_report/1.0", version),
        ("digest", version), ("fold", version), ("forensics", version),
        ("preparation_report", version), ("run_report", version),
        ("run_report/0.0", version), ("run_report/1.0", version),
    ]
    assert [_run([cmd, "r", "--db", db_url], capsys) for cmd in ("show", "forensics")] == before


def test_rebuild_snapshots_of_an_unknown_run_is_bad_input(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(["db", "rebuild-snapshots", "nope", "--db", db_url], capsys)
    assert (code, out) == (2, "")
    assert err == "assetcast: error: unknown run 'nope' (use `assetcast runs` to list runs)\n"


def test_db_upgrade_takes_no_run(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["db", "upgrade", "r", "--db", db_url], capsys)
    assert code == 2
    assert err == "assetcast: error: db upgrade takes no RUN argument\n"


def test_runs_rows_without_cached_counts_fall_back_to_the_digest(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row written before migration 0003 has NULL counts: `runs` still tells the truth."""
    cached = _run(["runs", "--json", "--db", db_url], capsys)
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE runs SET output_dir = NULL, last_event_type = NULL, batches_total = NULL, "
            "batches_resolved = NULL, batches_done = NULL, episodes_attempted = NULL, "
            "episodes_accepted = NULL, trajectories_committed = NULL, failures = NULL, "
            "resumes = NULL"
        ))
    engine.dispose()
    assert _run(["runs", "--json", "--db", db_url], capsys) == cached
