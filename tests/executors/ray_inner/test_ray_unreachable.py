"""A Ray cluster that cannot be joined is bad input: `collect`/`resume --ray-address` exit
2 with one line naming the address, and nothing is recorded (not even the lease)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.executors.ray_inner.conftest import prepared_run

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("command", ["collect", "resume"])
def test_an_unreachable_ray_address_exits_2_and_records_nothing(
    command: str, catalog: Path, tmp_path: Path
) -> None:
    store, run_id, _out = prepared_run(tmp_path, catalog, batches=1, episodes=1)
    before = [(e.seq, e.type) for e in store.read(run_id)]
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", command, run_id, "--db", url,
         "--ray-address", address, "--no-progress", "--log-level", "warning"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"assetcast: error: --ray-address {address}: no Ray cluster could be joined there "
        "(nothing answers: ConnectionRefusedError: [Errno 111] Connection refused)"
    ]
    assert [(e.seq, e.type) for e in store.read(run_id)] == before
    assert store.state(run_id).state == "prepared"
