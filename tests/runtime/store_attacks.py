"""Helpers for the store attack tests: synthetic stores, tampering, file-tree snapshots,
and running the CLI in a subprocess (optionally in a private mount namespace)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from store import EventStore
from tests.store.eventgen import created, legal_run, preparation

REPO = Path(__file__).resolve().parents[2]


def completed_store(path: Path, run_ids: tuple[str, ...] = ("r1", "r2", "r3")) -> str:
    """A SQLite store holding one small completed run per id; returns its URL."""
    url = f"sqlite:///{path}"
    store = EventStore(url)
    try:
        for run_id in run_ids:
            store.append(run_id, list(legal_run(run_id, 1, 1)), expected_version=0)
    finally:
        store.close()
    return url


def prepared_store(path: Path, run_id: str = "p1") -> str:
    """A SQLite store with one prepared (not yet collected) run."""
    url = f"sqlite:///{path}"
    store = EventStore(url)
    try:
        store.append(run_id, [created(run_id, "prepare"), *preparation(1)], expected_version=0)
    finally:
        store.close()
    return url


def tamper(path: Path, *statements: str) -> None:
    """Run raw SQL on the file, dropping the immutability triggers first (an attacker, or
    another tool, writing the database behind assetcast's back)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def tree(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: kind, size, mtime and content digest of regular files."""
    found: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            full = Path(dirpath) / name
            info = full.lstat()
            digest = None
            if full.is_file() and not full.is_symlink():
                digest = hashlib.sha256(full.read_bytes()).hexdigest()
            found[str(full.relative_to(root))] = (
                info.st_mode, info.st_size, info.st_mtime_ns, digest
            )
    return found


# Root without the capabilities that let it ignore file modes: chmod binds it again.
WITHOUT_DAC = (
    "setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner",
    "--inh-caps=-dac_override,-dac_read_search,-fowner",
)


def cli(
    *args: str, cwd: Path | None = None, timeout: float = 60, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``assetcast ARGS`` in a fresh interpreter (``prefix``: a wrapper such as setpriv)."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "runtime.cli", *args], cwd=cwd or REPO,
        capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def can_drop_dac() -> str | None:
    """None if WITHOUT_DAC really makes root obey file modes here; else why not."""
    if os.geteuid() != 0:
        return None  # not root: chmod already binds us
    if shutil.which("setpriv") is None:
        return "no setpriv(1) to drop root's DAC capabilities"
    probe = subprocess.run(
        [*WITHOUT_DAC, "sh", "-c", "test -w /proc/1/environ && exit 1; exit 0"],
        capture_output=True, timeout=30,
    )
    return None if probe.returncode == 0 else "setpriv could not drop DAC capabilities"


def can_unshare_mounts() -> str | None:
    """None if this process may make private mounts (root, util-linux unshare); else why not."""
    if os.geteuid() != 0:
        return "needs root for a private mount namespace"
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, timeout=30
    )
    if probe.returncode != 0:
        return f"unshare -m refused: {probe.stderr.decode(errors='replace').strip()}"
    return None


def cli_in_namespace(
    setup: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``assetcast ARGS`` after the shell commands ``setup`` ran in a private mount
    namespace (so a read-only or tiny mount never leaks to the host)."""
    import shlex

    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "runtime.cli", *args])
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-ec", f"{setup}\nexec {command}"],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
