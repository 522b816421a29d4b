"""Identifiers recorded in a run's log: readable, sortable run ids; per-process session ids
(so forensics can tell sessions apart); and the tool version that created the run."""

from __future__ import annotations

import importlib.metadata
import secrets
from datetime import UTC, datetime


def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"run-{stamp}-{secrets.token_hex(3)}"


def new_session_id() -> str:
    return secrets.token_hex(6)


def tool_version() -> str:
    try:
        return importlib.metadata.version("assetcast")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0+source"
