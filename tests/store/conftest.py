"""Fixtures for store tests: a fresh SQLite file per test, and the same on PostgreSQL.

``backend_url`` runs a test once per SQL backend. The PostgreSQL side is a private
throwaway cluster started once per session (tests/pg_support.py) or the server named
by ``ASSETCAST_TEST_PG_URL``; each test gets its own schema. Without PostgreSQL
binaries or psycopg the PostgreSQL cases are skipped with the reason, unless
``ASSETCAST_REQUIRE_PG=1`` makes that a failure (CI on the image that has them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from store import EventStore
from tests.pg_support import Cluster, PostgresUnavailable, cluster, fresh_schema

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture()
def sql_store(db_url: str):
    store = EventStore(db_url)
    yield store
    store.close()


_PG_NOTES: list[str] = []


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """Say which PostgreSQL the run used (output during fixtures is captured)."""
    for note in _PG_NOTES:
        terminalreporter.write_line(note)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    with ExitStack() as stack:
        started = time.perf_counter()
        try:
            found = stack.enter_context(cluster())
        except PostgresUnavailable as exc:
            reason = f"PostgreSQL tests skipped: {exc}"
            if os.environ.get("ASSETCAST_REQUIRE_PG") == "1":
                pytest.fail(reason.replace("skipped", "required but unavailable"))
            _PG_NOTES.append(reason)
            pytest.skip(reason)
        where = found.bin_dir or "ASSETCAST_TEST_PG_URL"
        _PG_NOTES.append(
            f"PostgreSQL {found.version} from {where} "
            f"(ready in {time.perf_counter() - started:.2f} s)"
        )
        yield found


@pytest.fixture()
def pg_url(pg_cluster: Cluster) -> Iterator[str]:
    """A URL whose connections see only a fresh, empty schema."""
    with fresh_schema(pg_cluster.url) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture()
def backend_store(backend_url: str) -> Iterator[EventStore]:
    store = EventStore(backend_url)
    yield store
    store.close()
