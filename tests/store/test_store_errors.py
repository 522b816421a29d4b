"""Store errors on both backends: schemas nobody may use, read-only opening, precise classes.

The SQLite-only attacks (files, mounts, FIFOs, locks) live in
tests/runtime/test_cli_store_errors.py; these run once per SQL backend.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from runtime.cli import main
from store import EventStore
from store.admin import head_revision
from store.engine import make_engine, safe_url
from store.errors import DatabaseReadOnly, SchemaMissing, SchemaTooNew
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)
from tests.store.eventgen import legal_run


def _filled(url: str) -> str:
    """The store at ``url`` with two completed runs; returns the URL as messages show it."""
    with EventStore(url) as store:
        for run_id in ("r1", "r2"):
            store.append(run_id, list(legal_run(run_id, 1, 1)), expected_version=0)
        return store.url


def _execute(url: str, statement: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def _count_events(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM events")).scalar_one())
    finally:
        engine.dispose()


def test_a_newer_revision_is_refused_by_every_opener(
    backend_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = _filled(backend_url)
    _execute(backend_url, "UPDATE alembic_version SET version_num = '0042_newer'")
    cause = (
        "written by a newer assetcast (schema revision 0042_newer); this assetcast knows "
        f"revisions up to {head_revision()}: upgrade assetcast"
    )
    for read_only in (True, False):
        with pytest.raises(SchemaTooNew) as caught:
            EventStore(backend_url, read_only=read_only)
        assert str(caught.value) == f"database {shown}: {cause}"
        assert caught.value.url == shown
    for command in (["runs"], ["show", "r1"], ["db", "upgrade"], ["db", "current"]):
        assert main([*command, "--db", backend_url]) == 2
        assert capsys.readouterr().err == f"assetcast: error: database {shown}: {cause}\n"
    engine = make_engine(backend_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [
                ("0042_newer",)
            ]
    finally:
        engine.dispose()


def test_tables_without_alembic_version_are_refused(backend_url: str) -> None:
    _filled(backend_url)
    _execute(backend_url, "DROP TABLE alembic_version")
    for read_only in (True, False):
        with pytest.raises(SchemaMissing, match="alembic_version table is missing"):
            EventStore(backend_url, read_only=read_only)
    engine = make_engine(backend_url)
    try:
        assert "alembic_version" not in sa.inspect(engine).get_table_names()  # not re-created
    finally:
        engine.dispose()


def test_a_read_only_store_reads_everything_and_refuses_every_write(backend_url: str) -> None:
    _filled(backend_url)
    before = _count_events(backend_url)
    with EventStore(backend_url, read_only=True) as store:
        assert [s.run_id for s in store.list_runs()] == ["r1", "r2"]
        assert store.state("r1").state == "completed"
        with pytest.raises(DatabaseReadOnly) as caught:
            store.append("r9", list(legal_run("r9", 1, 1))[:1], expected_version=0)
        assert str(caught.value).startswith(f"database {safe_url(store.engine)}: ")
        assert "read-only" in str(caught.value)
    assert _count_events(backend_url) == before


def test_read_only_opening_never_creates_a_schema(backend_url: str) -> None:
    parsed = sa.make_url(backend_url)
    if parsed.get_backend_name() == "sqlite":
        Path(str(parsed.database)).touch()  # an empty database, as a fresh PG schema is
    with pytest.raises(SchemaMissing) as caught:
        EventStore(backend_url, read_only=True)
    assert str(caught.value).endswith(": holds no assetcast store (nothing recorded there yet)")
    engine = make_engine(backend_url)
    try:
        assert sa.inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_a_missing_postgresql_database_is_named(
    pg_cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sa.make_url(pg_cluster.url).set(database="no_such_ledger")
    text = url.render_as_string(hide_password=False)
    shown = url.render_as_string(hide_password=True)
    for command in (["runs"], ["db", "upgrade"]):
        assert main([*command, "--db", text]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"assetcast: error: database {shown}: ")
        assert 'database "no_such_ledger" does not exist' in err
        assert len(err.splitlines()) == 1


def test_a_postgresql_row_lock_held_past_the_lock_timeout_names_the_holder(
    pg_url: str,
) -> None:
    """Another session holds the run's row (and the run's lease) in an open transaction:
    the append gives up after ``lock_timeout`` and names the lease holder."""
    from store.errors import DatabaseLocked

    url = sa.make_url(pg_url)
    options = f"{url.query['options']} -clock_timeout=300"
    impatient = url.update_query_dict({"options": options}).render_as_string(
        hide_password=False
    )
    with EventStore(pg_url) as holder:
        holder.append("r1", list(legal_run("r1", 1, 1))[:3], expected_version=0)
        holder.acquire_lease("r1", owner="holder-session", ttl_s=120)
        engine = make_engine(pg_url)
        try:
            with engine.connect() as conn, conn.begin():
                conn.execute(sa.text("SELECT * FROM runs WHERE run_id = 'r1' FOR UPDATE"))
                with EventStore(impatient) as waiter:
                    more = list(legal_run("r1", 1, 1))[3:4]
                    started = time.monotonic()
                    with pytest.raises(DatabaseLocked) as caught:
                        waiter.append("r1", more, expected_version=3)
                    assert time.monotonic() - started < 20
        finally:
            engine.dispose()
    message = str(caught.value)
    assert "another session held a lock for longer than the lock timeout" in message
    assert "; run 'r1' is held by owner 'holder-session' (pid " in message


def test_creating_a_sqlite_store_is_all_or_nothing_and_sweeps_dead_attempts(
    tmp_path: Path,
) -> None:
    """A creator killed mid-way leaves only its hidden temporary file; the next creator on
    this host removes it (its pid is gone) and publishes a complete store."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    abandoned = tmp_path / f".a.db.creating-{dead_pid}-0123456789ab"
    abandoned.write_bytes(b"SQLite format 3\x00 half a schema")
    (tmp_path / f"{abandoned.name}-wal").write_bytes(b"")
    live = tmp_path / f".a.db.creating-{os.getpid()}-ba9876543210"  # ours: still alive
    live.write_bytes(b"")
    with EventStore(f"sqlite:///{tmp_path / 'a.db'}") as store:
        assert store.list_runs() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.db", live.name])
