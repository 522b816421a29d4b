"""One autouse fixture for suites that drive ``runtime.cli.main`` in-process.

``main`` configures structlog and installs its own root handler on every call; without undoing
that after each test, one test's ``--log-json`` or level would leak into the next. A suite uses
it by importing ``reset_cli_logging`` into its module (pytest finds fixtures there)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def reset_cli_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    for handler in list(logging.getLogger().handlers):
        if getattr(handler, "_assetcast", False):
            logging.getLogger().removeHandler(handler)
