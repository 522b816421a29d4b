"""Headless Chromium for the report's browser test, run where it cannot reach the network.

Chromium makes background requests of its own (network time, account probes) whatever the
flags, so it runs inside a private network namespace with only loopback up
(``unshare --net``): nothing can leave the machine. In CI (``CI=true`` or
``ASSETCAST_REQUIRE_CHROMIUM=1``) a missing Chromium or namespace is a failure; locally the
test is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
)
TIMEOUT_S = 120


def _required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("ASSETCAST_REQUIRE_CHROMIUM") == "1"


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"Chromium required (CI) but unavailable: {reason}; run .ci/chromium")
    pytest.skip(f"browser test skipped: {reason} (install with .ci/chromium)")


def find_chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        _unavailable("no chromium on PATH")
    probe = subprocess.run(
        ["unshare", "--net", "sh", "-c", "ip link set lo up"], capture_output=True, text=True,
        check=False,
    ) if shutil.which("unshare") and shutil.which("ip") else None
    if probe is None or probe.returncode != 0:
        _unavailable(
            "cannot create a loopback-only network namespace (unshare --net): "
            + (probe.stderr.strip() if probe else "unshare or ip missing")
        )
    return str(path)


def run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Chromium with ``FLAGS`` and a fresh ``--user-data-dir``, in its own network namespace."""
    command = [chromium, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(
        ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "chromium", *command],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )


def page_requests(net_log: Path) -> list[str]:
    """URLs the page itself asked for (Chromium's own background requests have no origin)."""
    log = json.loads(net_log.read_text(encoding="utf-8"))
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        e["params"]["url"]
        for e in log["events"]
        if e["type"] == start and e.get("params", {}).get("initiator") != "not an origin"
        and "url" in e["params"] and not e["params"]["url"].startswith(("data:", "file:"))
    ]
