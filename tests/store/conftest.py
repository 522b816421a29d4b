"""Fixtures for store tests: a fresh SQLite file per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import EventStore


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture()
def sql_store(db_url: str):
    store = EventStore(db_url)
    yield store
    store.close()
