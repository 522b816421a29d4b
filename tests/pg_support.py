"""A throwaway PostgreSQL cluster for tests and benchmarks.

Why a private cluster: CI has no database service and no network, but the image ships
the PostgreSQL server binaries. ``initdb`` refuses to run as root, so as root the
cluster is created and run as the ``postgres`` system user (or ``nobody``) via
``subprocess``'s ``user=``; otherwise as the current user. The server listens only on
a unix socket inside its own temporary directory, so parallel sessions never collide
and nothing is reachable from outside. Each test gets its own schema (via the
connection's ``search_path``), which is cheaper than a database per test and also
safe on an external server named by ``ASSETCAST_TEST_PG_URL``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa

EXTERNAL_URL_ENV = "ASSETCAST_TEST_PG_URL"
TEST_DB = "assetcast_test"
# Throwaway data: skip fsync for speed unless a benchmark asks for durability.
_FAST = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries or driver here; the message says what is missing."""


@dataclass(frozen=True)
class Cluster:
    url: str                 # SQLAlchemy URL of the test database
    bin_dir: str | None      # where initdb/pg_ctl came from (None: external server)
    version: str             # server version string


def find_bin_dir() -> str | None:
    """The directory holding both ``initdb`` and ``pg_ctl``: PATH first, then the
    Debian layout /usr/lib/postgresql/<major>/bin (newest major first)."""
    initdb = shutil.which("initdb")
    if initdb:
        real = Path(initdb).resolve().parent
        if (real / "pg_ctl").exists():
            return str(real)
    majors = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else -1,
        reverse=True,
    )
    for candidate in majors:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return candidate
    return None


def _service_user() -> str | None:
    """None: run as ourselves. As root: ``postgres`` if it exists, else ``nobody``."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PostgresUnavailable("running as root and neither 'postgres' nor 'nobody' exists")


def require_driver() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise PostgresUnavailable(
            "psycopg 3 is not installed (pip install 'psycopg[binary]')"
        ) from exc


def _run(args: list[str], user: str | None, cwd: str, log: Path | None = None) -> None:
    kwargs: dict = {}
    if user is not None:
        entry = pwd.getpwnam(user)
        kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        raise PostgresUnavailable(
            f"{Path(args[0]).name} failed ({done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-2000:]}\n{tail}"
        )


@contextmanager
def local_cluster(*, durable: bool = False) -> Iterator[Cluster]:
    """Start a private cluster, create ``assetcast_test``, yield it, then stop and delete it."""
    require_driver()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable(
            "no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin "
            f"(set {EXTERNAL_URL_ENV} to use a running server)"
        )
    user = _service_user()
    # Short base path: the socket path must fit in 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="assetcast-pg-", dir="/tmp" if Path("/tmp").is_dir()
                                 else None))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data, log = root / "data", root / "server.log"
    started = False
    try:
        _run([f"{bin_dir}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres",
              "-E", "UTF8", "--locale=C", "--no-sync"], user, str(root))
        # pg_ctl hands -o to a shell; root is a mkdtemp path (no spaces or quotes).
        options = f"-k {root} -c listen_addresses='' -c max_connections=60 " + (
            "" if durable else _FAST
        )
        _run([f"{bin_dir}/pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", "30",
              "-o", options, "start"], user, str(root), log)
        started = True
        def url(database: str) -> str:
            return f"postgresql+psycopg://postgres@/{database}?host={quote(str(root), safe='/')}"

        admin = sa.create_engine(url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {TEST_DB}")
                version = conn.exec_driver_sql("SHOW server_version").scalar_one()
        finally:
            admin.dispose()
        yield Cluster(url(TEST_DB), bin_dir, str(version))
    finally:
        if started:
            try:
                _run([f"{bin_dir}/pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"],
                     user, str(root))
            finally:
                shutil.rmtree(root, ignore_errors=True)
        else:
            shutil.rmtree(root, ignore_errors=True)


@contextmanager
def cluster() -> Iterator[Cluster]:
    """``ASSETCAST_TEST_PG_URL`` if set (left untouched apart from test schemas), else a
    private local cluster. Raises PostgresUnavailable with the reason if neither works."""
    external = os.environ.get(EXTERNAL_URL_ENV)
    if not external:
        with local_cluster() as local:
            yield local
        return
    require_driver()
    engine = sa.create_engine(external)
    try:
        with engine.connect() as conn:
            version = conn.exec_driver_sql("SHOW server_version").scalar_one()
    finally:
        engine.dispose()
    yield Cluster(external, None, str(version))


@contextmanager
def fresh_schema(base_url: str) -> Iterator[str]:
    """A new empty schema; yields a URL whose connections use it as ``search_path``."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(base_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {name}")
        url = sa.make_url(base_url)
        try:
            yield url.update_query_dict({"options": f"-csearch_path={name}"}).render_as_string(
                hide_password=False
            )
        finally:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")
    finally:
        engine.dispose()
