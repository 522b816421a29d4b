"""Store errors on both backends: schemas nobody may use, read-only opening, precise classes.

The SQLite-only attacks (files, mounts, FIFOs, locks) live in
tests/runtime/test_cli_store_errors.py; these run once per SQL backend.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sqlalchemy as sa
import structlog

from runtime.cli import main
from store import EventStore
from store.admin import head_revision
from store.engine import make_engine, safe_url
from store.errors import DatabaseReadOnly, SchemaMissing, SchemaTooNew
from tests.store.eventgen import legal_run


@pytest.fixture(autouse=True)
def _reset_logging():
    yield
    structlog.reset_defaults()
    for handler in list(logging.getLogger().handlers):
        if getattr(handler, "_assetcast", False):
            logging.getLogger().removeHandler(handler)


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
