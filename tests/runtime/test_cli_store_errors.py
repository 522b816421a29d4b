"""The store fails in one line and never misleads: each attack on ``--db`` for real, through
the command line, with the exact message and exit code, and nothing created or changed."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.cli import main
from store.admin import head_revision, known_revisions
from tests.runtime.store_attacks import (
    REPO,
    WITHOUT_DAC,
    can_drop_dac,
    can_unshare_mounts,
    cli,
    cli_in_namespace,
    completed_store,
    prepared_store,
    tamper,
    tree,
)

READ_COMMANDS = (
    ["runs"], ["show", "r1"], ["events", "r1"], ["audit"], ["forensics", "r1"], ["verify", "r1"],
)
# Commands that would write: each must refuse a bad database before touching anything.
WRITE_COMMANDS = (["collect", "r1", "--no-progress"], ["resume", "r1", "--no-progress"],
                  ["db", "upgrade"])
ALL_COMMANDS = (
    *READ_COMMANDS, *WRITE_COMMANDS, ["db", "current"],
    ["episode", "r1", "0", "0", "--frames", "frames"],
)


def _one_line_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str, code: int = 2
) -> None:
    assert main(argv) == code, argv
    captured = capsys.readouterr()
    assert captured.err == f"assetcast: error: {expected}\n", argv
    assert captured.out == ""


def _closed_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------ what --db names is no database


@pytest.mark.timeout(120)
def test_a_db_that_is_not_a_database_file_is_one_line_and_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "notes.db").write_text("hello, not sqlite\n")
    os.mkfifo(tmp_path / "pipe.db")  # SQLite would block on it forever
    cases = {
        f"sqlite:///{tmp_path / 'adir'}":
            f"{tmp_path / 'adir'} is a directory, not a database file",
        f"sqlite:///{tmp_path / 'notes.db'}":
            f"{tmp_path / 'notes.db'} is not a SQLite database file (no SQLite header)",
        f"sqlite:///{tmp_path / 'pipe.db'}":
            f"{tmp_path / 'pipe.db'} is a FIFO (named pipe), not a database file",
        "sqlite:////dev/null": "/dev/null is a character device, not a database file",
    }
    before, null_before = tree(tmp_path), os.stat("/dev/null")
    for url, cause in cases.items():
        for command in ALL_COMMANDS:
            _one_line_error(capsys, [*command, "--db", url], f"database {url}: {cause}")
    assert tree(tmp_path) == before
    assert not Path("/dev/null-journal").exists() and not Path("/dev/null-wal").exists()
    assert os.stat("/dev/null").st_rdev == null_before.st_rdev


def test_a_sqlite_side_file_that_is_a_fifo_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = completed_store(tmp_path / "a.db")
    os.mkfifo(tmp_path / "a.db-wal")
    before = tree(tmp_path)
    _one_line_error(
        capsys, ["runs", "--db", url],
        f"database {url}: {tmp_path / 'a.db-wal'} is a FIFO (named pipe), not SQLite's wal file",
    )
    assert tree(tmp_path) == before


def test_a_database_in_a_missing_directory_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}"
    for command in (*READ_COMMANDS, ["collect", "r1"], ["db", "current"]):
        _one_line_error(
            capsys, [*command, "--db", url],
            f"database {url}: no database file at {tmp_path / 'no/such/x.db'} "
            "(nothing recorded there yet)",
        )
    _one_line_error(
        capsys, ["db", "upgrade", "--db", url],
        f"database {url}: directory {tmp_path / 'no/such'} does not exist "
        "(it is not created for a database)",
    )
    task = tmp_path / "task.yaml"
    from runtime.demo import demo_task_text

    task.write_text(demo_task_text())
    catalog = tmp_path / "catalog"
    assert main(["catalog", "demo", str(catalog)]) == 0
    capsys.readouterr()
    before = tree(tmp_path)
    _one_line_error(
        capsys,
        ["prepare", str(task), "--catalog", f"item={catalog}", "--catalog", f"bin={catalog}",
         "--out", str(tmp_path / "out"), "--db", url, "--log-level", "warning"],
        f"database {url}: directory {tmp_path / 'no/such'} does not exist "
        "(it is not created for a database)",
    )
    assert tree(tmp_path) == before  # no directory, no output folder


def test_urls_that_are_no_database_urls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    example = "e.g. sqlite:///assetcast.db or postgresql+psycopg://user@host/dbname"
    cases = {
        "": f"database '': empty database URL ({example})",
        "not a url": f"database 'not a url': not a database URL ({example})",
        "nosuch://u:secret@host/db":
            f"database nosuch://u:***@host/db: no SQLAlchemy dialect 'nosuch' is installed "
            f"({example})",
        "sqlite:///x.db?timeout=soon":
            "database sqlite:///x.db?timeout=soon: timeout='soon' is not a number of seconds",
    }
    try:
        import MySQLdb  # noqa: F401
    except ImportError:
        cases["mysql://u:secret@127.0.0.1/db"] = (
            "database mysql://u:***@127.0.0.1/db: the mysql driver is not installed "
            "(no module 'MySQLdb')"
        )
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        cases["postgresql+psycopg2://u:secret@127.0.0.1/db"] = (
            "database postgresql+psycopg2://u:***@127.0.0.1/db: the postgresql+psycopg2 driver "
            "is not installed (no module 'psycopg2')"
        )
    for url, message in cases.items():
        for command in (["runs"], ["db", "upgrade"], ["resume", "r1"]):
            _one_line_error(capsys, [*command, "--db", url], message)
    assert list(tmp_path.iterdir()) == []  # not even the default database


def test_an_unreachable_postgresql_is_one_line_with_the_password_hidden(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = _closed_loopback_port()
    url = f"postgresql+psycopg://assetcast:s3cret-pw@127.0.0.1:{port}/ledger"
    shown = f"postgresql+psycopg://assetcast:***@127.0.0.1:{port}/ledger"
    for command in (["runs"], ["show", "r1"], ["db", "upgrade"], ["resume", "r1"]):
        assert main([*command, "--db", url]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"assetcast: error: database {shown}: cannot connect: connection failed: "
            f"connection to server at \"127.0.0.1\", port {port} failed: Connection refused\n"
        )
        assert "s3cret-pw" not in err


# ---------------------------------------------------------------------- schemas we cannot use


def _revision(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def test_a_newer_schema_revision_is_named_and_never_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = completed_store(tmp_path / "a.db")
    _revision(tmp_path / "a.db", "UPDATE alembic_version SET version_num = '0099_from_the_future'")
    before = tree(tmp_path)
    message = (
        f"database {url}: written by a newer assetcast (schema revision 0099_from_the_future); "
        f"this assetcast knows revisions up to {head_revision()}: upgrade assetcast"
    )
    for command in ALL_COMMANDS:
        _one_line_error(capsys, [*command, "--db", url], message)
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("statement", "state"),
    [("DROP TABLE alembic_version", "is missing"), ("DELETE FROM alembic_version", "is empty")],
)
def test_assetcast_tables_without_a_revision_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], statement: str, state: str
) -> None:
    url = completed_store(tmp_path / "a.db")
    _revision(tmp_path / "a.db", statement)
    before = tree(tmp_path)
    message = (
        f"database {url}: has assetcast tables (events, leases, runs, snapshots) but its "
        f"alembic_version table {state}, so its schema revision is unknown (not created by "
        "assetcast's migrations): refusing to use or migrate it"
    )
    for command in ALL_COMMANDS:
        _one_line_error(capsys, [*command, "--db", url], message)
    assert tree(tmp_path) == before


def test_an_empty_database_file_is_nothing_recorded_and_stays_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty.db").touch()
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    before = tree(tmp_path)
    for command in (*READ_COMMANDS, ["collect", "r1"], ["resume", "r1"]):
        _one_line_error(
            capsys, [*command, "--db", url],
            f"database {url}: holds no assetcast store (nothing recorded there yet)",
        )
    assert tree(tmp_path) == before


def test_read_only_commands_report_an_older_schema_instead_of_migrating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from alembic import command

    from store.admin import alembic_config

    first = next(r for r in known_revisions() if r != head_revision()) if len(
        known_revisions()) > 1 else None
    if first is None:
        pytest.skip("only one schema revision exists, so no database can be older")
    url = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(url), first)
    before = tree(tmp_path)
    for argv in READ_COMMANDS:
        _one_line_error(
            capsys, [*argv, "--db", url],
            f"database {url}: is at schema revision {first}, older than this assetcast's "
            f"{head_revision()}: run `assetcast db upgrade` first (read-only commands never "
            "migrate)",
        )
    assert tree(tmp_path) == before


# ------------------------------------------------------------------ reading leaves no trace


def test_read_only_commands_leave_the_directory_exactly_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = completed_store(tmp_path / "a.db")
    before = tree(tmp_path)
    assert set(before) == {"a.db"}
    for command in READ_COMMANDS:
        # verify: the synthetic runs have no files on disk, so it finds problems (exit 1)
        assert main([*command, "--db", url, "--log-level", "warning"]) in (0, 1)
        assert capsys.readouterr().err == ""
    assert main(["db", "current", "--db", url]) == 0
    assert tree(tmp_path) == before  # no -wal/-shm left behind, not a byte changed


@pytest.mark.timeout(300)
def test_an_archived_store_on_a_read_only_mount_can_be_inspected(tmp_path: Path) -> None:
    why = can_unshare_mounts()
    if why:
        pytest.skip(why)
    archive = tmp_path / "archive"
    archive.mkdir()
    url = completed_store(archive / "a.db")
    before = tree(archive)
    ro = f"mount --bind {archive} {archive}\nmount -o remount,bind,ro {archive}"
    probe = cli_in_namespace(ro + f"\ntouch {archive}/probe || exit 0\nexit 9", "--version")
    assert probe.returncode == 0, "the bind mount was not read-only"
    expected = {
        "runs": "r1   place_item_in_bin  completed  1/1",
        "show": "run:        r1",
        "events": "    1  ",
        "audit": "asset  sha256",
        "forensics": "run r1: completed after 17 events",
        "verify": "run r1: ",
    }
    for command in READ_COMMANDS:
        done = cli_in_namespace(ro, *command, "--db", url, "--log-level", "warning")
        assert done.stderr == "", (command, done.stderr)
        assert done.returncode in ((0, 1) if command[0] == "verify" else (0,)), command
        assert expected[command[0]] in done.stdout, (command, done.stdout)
    done = cli_in_namespace(ro, "db", "current", "--db", url)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{head_revision()}\n", "")
    for command in (["collect", "r1", "--no-progress"], ["db", "upgrade"]):
        done = cli_in_namespace(ro, *command, "--db", url)
        assert done.returncode == 2, command
        assert done.stderr == (
            f"assetcast: error: database {url}: {archive} is on a read-only filesystem; only "
            "read-only commands (runs, show, events, audit, forensics, verify, episode) work "
            "there\n"
        )
    assert tree(archive) == before


@pytest.mark.timeout(300)
def test_a_read_only_file_in_a_read_only_directory_is_read_without_a_trace(
    tmp_path: Path,
) -> None:
    """chmod 444 file in a 555 directory. As root chmod alone stops nothing, so the command
    runs as root without its DAC capabilities (setpriv): SQLite then cannot create its
    -shm file there, and the store must be opened immutable to be read at all."""
    why = can_drop_dac()
    if why:
        pytest.skip(why)
    prefix = WITHOUT_DAC if os.geteuid() == 0 else ()
    shared = tmp_path / "shared"
    shared.mkdir()
    url = completed_store(shared / "a.db")
    os.chmod(shared / "a.db", 0o444)
    os.chmod(shared, 0o555)
    before = tree(shared)
    try:
        done = cli("runs", "--db", url, prefix=prefix)
        assert (done.returncode, done.stderr) == (0, "")
        assert "r3   place_item_in_bin  completed" in done.stdout
        done = cli("show", "r2", "--db", url, prefix=prefix)
        assert (done.returncode, done.stderr) == (0, "")
        done = cli("collect", "r1", "--db", url, prefix=prefix)
        assert (done.returncode, done.stderr) == (
            2, f"assetcast: error: database {url}: directory {shared} is not writable\n"
        )
    finally:
        os.chmod(shared, 0o755)
    assert tree(shared) == before


# ---------------------------------------------------------------- one broken run, not all


def test_a_corrupt_event_row_names_its_run_and_the_others_are_still_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = completed_store(tmp_path / "a.db")
    tamper(
        tmp_path / "a.db",
        "UPDATE events SET payload = '{not json' WHERE run_id = 'r2' AND seq = 5",
        "UPDATE events SET type = 'Bogus' WHERE run_id = 'r3' AND seq = 3",
    )
    broken = (
        "assetcast: error: left out of the report: run 'r2' seq 5 PreparationCompleted: payload "
        "is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1)\n"
        "assetcast: error: left out of the report: run 'r3' seq 3 'Bogus': unknown event type\n"
    )
    # the altered rows also break each run's hash chain, which is said first (issue 13)
    chain_r2 = (
        "assetcast: warning: run r2: hash chain broken: seq 5 (PreparationCompleted) differs "
        "from what was recorded: its content no longer matches its hash\n"
    )
    chain_r3 = (
        "assetcast: warning: run r3: hash chain broken: seq 3 (Bogus) differs from what was "
        "recorded: its content no longer matches its hash\n"
    )
    # `runs` answers from the runs table but decodes each run's events after its chain
    # anchor (here: all of them, no snapshot yet), so a corrupt row leaves its run out
    assert main(["runs", "--db", url]) == 1
    captured = capsys.readouterr()
    assert captured.err == chain_r2 + chain_r3 + broken
    rows = captured.out.splitlines()[2:]
    assert [row.split()[0] for row in rows] == ["r1"]

    assert main(["audit", "--db", url]) == 1
    captured = capsys.readouterr()
    assert captured.err == chain_r2 + chain_r3 + broken
    assert "a      c       item   1     1        0/1" in captured.out

    assert main(["audit", "--json", "--db", url]) == 1
    import json

    report = json.loads(capsys.readouterr().out)
    assert [(u["run_id"], u["seq"]) for u in report["unreadable_runs"]] == [("r2", 5), ("r3", 3)]
    assert [r["run_id"] for r in report["runs"]] == ["r1"]

    assert main(["show", "r3", "--db", url]) == 1
    assert capsys.readouterr().err == (
        chain_r3 + "assetcast: error: run 'r3' seq 3 'Bogus': unknown event type\n"
    )
    assert main(["show", "r1", "--db", url]) == 0


# ------------------------------------------------------------------- locks and failures


_HOLDER = """
import sqlite3, sys, time
from store import EventStore
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)
path, take_lease = sys.argv[1], sys.argv[2] == "lease"
store = EventStore(f"sqlite:///{path}")
if take_lease:
    store.acquire_lease("p1", owner="holder-session", ttl_s=120)
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lease", [True, False])
def test_a_write_lock_held_past_the_busy_timeout_says_so_and_names_the_holder(
    tmp_path: Path, lease: bool
) -> None:
    url = prepared_store(tmp_path / "a.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "a.db"), "lease" if lease else "-"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        before = tree(tmp_path)
        started = time.monotonic()
        done = cli("collect", "p1", "--no-progress", "--db", f"{url}?timeout=0.5")
        assert time.monotonic() - started < 50
        assert done.returncode == 2
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        head = (
            f"assetcast: error: database {url}?timeout=0.5: another process held the write "
            "lock for longer than the 0.5 s busy timeout (SQLITE_BUSY: database is locked)"
        )
        if lease:
            assert lines[0].startswith(
                f"{head}; run 'p1' is held by owner 'holder-session' (pid {holder.pid} on host "
            ), lines[0]
        else:
            assert lines[0] == head
        assert "forensics" not in done.stderr  # no RunFailed was recorded: no such hint
        assert tree(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.timeout(300)
def test_a_filesystem_too_small_for_the_schema_is_one_line_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    why = can_unshare_mounts()
    if why:
        pytest.skip(why)
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    url = f"sqlite:///{tiny / 'x.db'}"
    for size in ("4k", "16k"):
        done = cli_in_namespace(
            f"mount -t tmpfs -o size={size} tmpfs {tiny}", "db", "upgrade", "--db", url
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(
            f"assetcast: error: database {url}: no space left for the database"
        ), done.stderr
        assert len(done.stderr.splitlines()) == 1
        # What was left inside the tiny mount is checked there: nothing at all.
        listing = cli_in_namespace(
            f"mount -t tmpfs -o size={size} tmpfs {tiny}\n"
            f"{sys.executable} -m runtime.cli db upgrade --db {url} 2>/dev/null || true\n"
            f"ls -A {tiny} >&2\nexit 0\n: ", "--version",
        )
        assert listing.stderr == "", listing.stderr


@pytest.mark.timeout(300)
def test_a_run_whose_failure_could_not_be_recorded_says_so_not_see_forensics(
    tmp_path: Path,
) -> None:
    """Another process takes the write lock right after ``RunCreated`` and keeps it: the
    preparer cannot append its next event, nor ``RunFailed``. The message must say the
    failure is not in the log, and must not send the user to a recorded failure."""
    from runtime.demo import demo_task_text

    catalog = tmp_path / "catalog"
    assert main(["catalog", "demo", str(catalog)]) == 0
    task = tmp_path / "task.yaml"
    task.write_text(demo_task_text())
    path = tmp_path / "a.db"
    url = f"sqlite:///{path}"
    prepare = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "prepare", str(task), "--catalog",
         f"item={catalog}", "--catalog", f"bin={catalog}", "--out", str(tmp_path / "out"),
         "--db", f"{url}?timeout=0.5", "--log-level", "critical"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    lock = None
    try:
        deadline = time.monotonic() + 120
        while lock is None and time.monotonic() < deadline and prepare.poll() is None:
            if path.exists():
                conn = sqlite3.connect(path, isolation_level=None, timeout=10)
                try:
                    created = conn.execute(
                        "SELECT count(*) FROM events WHERE type = 'RunCreated'"
                    ).fetchone()[0]
                except sqlite3.OperationalError:  # schema not there yet
                    created = 0
                if created:
                    conn.execute("BEGIN IMMEDIATE")
                    lock = conn
                    break
                conn.close()
            time.sleep(0.005)
        assert lock is not None, "the preparer finished before the lock could be taken"
        _out, err = prepare.communicate(timeout=240)
    finally:
        if prepare.poll() is None:
            prepare.kill()
        if lock is not None:
            lock.close()
    [run] = _run_ids(url)
    assert prepare.returncode == 1, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"assetcast: run {run} stopped: DatabaseLocked: database {url}")
    assert lines[0].endswith(
        f"(its failure could not be recorded; `assetcast forensics {run}` shows what the log "
        "holds)"
    )
    assert "RunFailed" not in _types(url, run)


def _run_ids(url: str) -> list[str]:
    from store import EventStore

    with EventStore(url, read_only=True) as store:
        return [s.run_id for s in store.list_runs()]


def _types(url: str, run_id: str) -> list[str]:
    from store import EventStore

    with EventStore(url, read_only=True) as store:
        return [e.type for e in store.read(run_id)]


@pytest.mark.timeout(120)
def test_an_immutable_database_file_is_read_without_a_trace(tmp_path: Path) -> None:
    """``chattr +i``: not even root may write the file; reading must still work and leave
    no -wal/-shm beside it, and a writer is refused in one line."""
    import shutil

    if shutil.which("chattr") is None:
        pytest.skip("no chattr(1)")
    url = completed_store(tmp_path / "a.db")
    flagged = subprocess.run(["chattr", "+i", str(tmp_path / "a.db")], capture_output=True)
    if flagged.returncode != 0:
        pytest.skip(f"chattr +i refused here: {flagged.stderr.decode(errors='replace').strip()}")
    try:
        before = tree(tmp_path)
        done = cli("runs", "--db", url)
        assert (done.returncode, done.stderr) == (0, "")
        assert "r2   place_item_in_bin  completed" in done.stdout
        done = cli("collect", "r1", "--db", url)
        assert (done.returncode, done.stderr) == (
            2, f"assetcast: error: database {url}: {tmp_path / 'a.db'} is not writable; only "
            "read-only commands work on it\n",
        )
        assert tree(tmp_path) == before
    finally:
        subprocess.run(["chattr", "-i", str(tmp_path / "a.db")], check=True)


def test_a_schema_altered_by_hand_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = prepared_store(tmp_path / "a.db")
    tamper(tmp_path / "a.db", "DROP TABLE leases")
    before = tree(tmp_path)
    _one_line_error(
        capsys, ["collect", "p1", "--no-progress", "--db", url],
        f"database {url}: the schema does not match its recorded revision (altered outside "
        "assetcast?): SQLITE_ERROR: no such table: leases",
    )
    assert tree(tmp_path) == before
