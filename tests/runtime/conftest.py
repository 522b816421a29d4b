"""Fixtures shared by the runtime suites; a module's own fixture of the same name wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.collection.demo_run import write_catalog
from store import InMemoryEventStore


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The procedural demo catalog, written once per module."""
    return write_catalog(tmp_path_factory.mktemp("catalog") / "demo")


@pytest.fixture
def store() -> InMemoryEventStore:
    return InMemoryEventStore()
