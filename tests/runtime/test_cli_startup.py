"""Read-only commands start fast: they import no simulator, no torch, no mesh library and no
pydantic/SQLModel (the store speaks SQLAlchemy Core only).

Each command runs in a fresh interpreter (imports are process-wide, so an in-process check
would see whatever other tests imported) and reports which heavy modules it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from store import EventStore
from tests.store.eventgen import legal_run

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "mujoco", "trimesh", "scipy", "pydantic", "sqlmodel", "sqlalchemy.orm",
         "runtime.collection.driver")  # the collector: verify reads one module of its package

COMMANDS = [["runs"], ["runs", "--json"], ["show", "r"], ["show", "r", "--json"],
            ["events", "r"], ["audit"], ["forensics", "r"], ["verify", "r"],
            ["verify", "r", "--head", "0" * 64]]

# One interpreter runs every command in turn; modules loaded only accumulate, so the first
# command after which a heavy module is present is the one that imported it.
_PROBE = """
import contextlib, io, json, sys
from runtime.cli.entry_point import main
HEAVY = json.loads(sys.argv[3])
url, commands = sys.argv[1], json.loads(sys.argv[2])
report = []
for argv in commands:
    with contextlib.redirect_stdout(io.StringIO()):
        code = main([*argv, "--db", url])
    report.append([" ".join(argv), code, [m for m in HEAVY if m in sys.modules]])
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('startup') / 'a.db'}"
    with EventStore(url) as store:
        store.append("r", list(legal_run("r", 2, 3)), expected_version=0)
    return url


def test_read_only_commands_import_no_heavy_module(db_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, db_url, json.dumps(COMMANDS), json.dumps(HEAVY)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    # verify exits 1 here (the generated run names no real files); what matters is what it
    # imported to find that out
    assert report == [
        [" ".join(argv), 1 if argv[0] == "verify" else 0, []] for argv in COMMANDS
    ]
