"""Schema comes only from Alembic; the models agree with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from store.admin import current, head_revision, upgrade
from store.engine import make_engine
from store.tables import STORE_METADATA


def test_upgrade_empty_file_to_head_from_any_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    monkeypatch.chdir(tmp_path)  # scripts are found relative to the package, not the CWD
    assert current(url) is None
    assert upgrade(url) == head_revision() == "0001_initial"
    assert current(url) == "0001_initial"
    assert upgrade(url) == "0001_initial"  # idempotent
    engine = make_engine(url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"runs", "events", "leases", "alembic_version"} <= tables


def test_models_and_migrations_agree(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cmp.db'}"
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
