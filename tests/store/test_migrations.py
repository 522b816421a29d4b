"""Schema comes only from Alembic; the models agree with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from store.admin import current, head_revision, upgrade
from store.engine import make_engine
from store.tables import STORE_METADATA

REPO = Path(__file__).resolve().parents[2]


def test_upgrade_empty_file_to_head_from_any_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    monkeypatch.chdir(tmp_path)  # scripts are found relative to the package, not the CWD
    assert current(url) is None
    assert not (tmp_path / "fresh.db").exists()  # reading the revision never creates the file
    assert upgrade(url) == head_revision() == "0002_hash_chain"
    assert current(url) == "0002_hash_chain"
    assert upgrade(url) == "0002_hash_chain"  # idempotent
    engine = make_engine(url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"runs", "events", "leases", "alembic_version"} <= tables


def test_upgrade_empty_database_to_head(backend_url: str) -> None:
    assert current(backend_url) is None
    assert upgrade(backend_url) == head_revision()
    assert upgrade(backend_url) == current(backend_url) == head_revision()  # idempotent
    engine = make_engine(backend_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"runs", "events", "leases", "alembic_version"} <= tables


_OPENER = """
import sys, time
from store import EventStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
EventStore(sys.argv[1]).close()
"""


def test_concurrent_first_openers_upgrade_once(backend_url: str) -> None:
    """Processes opening an empty database at the same moment must not race on CREATE
    TABLE (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock around the upgrade)."""
    start_at = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, backend_url, repr(start_at)], cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(3)
    ]
    failures = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if proc.returncode != 0:
            failures.append(err.strip().splitlines()[-25:])
    assert failures == []
    assert current(backend_url) == head_revision()


def test_models_and_migrations_agree(backend_url: str) -> None:
    url = backend_url
    upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            diffs = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}),
                _store_only(STORE_METADATA),
            )
    finally:
        engine.dispose()
    assert diffs == []


def _store_only(metadata: sa.MetaData) -> sa.MetaData:
    """The store's own tables (other packages might register SQLModel tables too)."""
    only = sa.MetaData()
    for name in ("runs", "events", "leases"):
        metadata.tables[name].to_metadata(only)
    return only
