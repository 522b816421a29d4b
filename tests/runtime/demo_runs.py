"""A prepared demo run, as the collection and resume suites start from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.collection.demo_run import prepare_demo_run


def prepared(store: Any, out: Path, catalog: Path, **kwargs: Any) -> str:
    """A prepared demo run in ``out``: 2 batches x 2 episodes, settle 10, unless overridden."""
    options = {"batches": 2, "episodes_per_batch": 2, "settle_steps": 10, **kwargs}
    return prepare_demo_run(store, out, catalog, **options)
