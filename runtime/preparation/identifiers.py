"""Identifiers recorded in a run's ``RunCreated``: readable, sortable run ids and the tool
version that created the run. (Session ids belong to every kind of session and live in
``runtime.session``.)"""

from __future__ import annotations

import importlib.metadata
import secrets
from datetime import UTC, datetime


def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"run-{stamp}-{secrets.token_hex(3)}"


def tool_version() -> str:
    try:
        return importlib.metadata.version("assetcast")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0+source"
