"""The SQL event store (any SQLAlchemy URL; SQLite by default).

Appends are one transaction: a compare-and-swap on ``runs.version`` (or the insert
of the run row for version 0) followed by the event rows. The CAS is what makes
optimistic concurrency portable: whoever updates the version first wins, the other
writer's update matches no row and its whole batch is rolled back. On SQLite the
writer holds the database lock from BEGIN IMMEDIATE; on PostgreSQL (READ COMMITTED)
the loser's UPDATE waits on the winner's row lock, re-reads the row after the commit
and matches nothing. Stricter isolation levels report the same race as a
serialization failure, which is mapped to the same ConcurrencyError.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

import sqlalchemy as sa
import structlog
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from domain.errors import ConcurrencyError, LeaseHeld
from domain.events import SCHEMA_VERSION
from domain.state import RunState
from store.admin import (
    check_readable,
    check_writable_store,
    create_sqlite_store,
    ensure_schema,
)
from store.base import StoreCore
from store.engine import is_write_conflict, make_engine, safe_url
from store.errors import DatabaseLocked, SchemaMismatch
from store.leases import (
    Lease,
    fenced_by,
    held_message,
    is_live,
    lease_lost,
    new_expiry,
    this_host,
)
from store.records import RUN_COUNT_FIELDS, LeaseInfo, RunSummary, as_utc, run_counts, utcnow
from store.snapshots import SnapshotRecord, event_digest
from store.statements import DriverStatement
from store.stored_rows import FoldRow, PreparedEvent, ReadRow
from store.tables import events_table, leases_table, runs_table, snapshots_table

log = structlog.get_logger(__name__)

_E = events_table.c
_R = runs_table.c
_L = leases_table.c
_S = snapshots_table.c

# Rows per query when a log is streamed: bounds memory whatever the log's length.
READ_CHUNK = 5000


_EVENT_ROW_KEYS = ("seq", "type", "payload", "prev_hash", "hash")


class _Statements:
    """The hot-path statements, compiled once for the engine's dialect."""

    def __init__(self, dialect: Dialect) -> None:
        # inline(): no RETURNING of the generated position (PostgreSQL would add one).
        self.insert_events = DriverStatement(
            events_table.insert().inline(), dialect,
            column_keys=(
                "run_id", "seq", "type", "payload", "recorded_at", "schema_version",
                "prev_hash", "hash",
            ),
        )
        self.bump_run = DriverStatement(
            runs_table.update()
            .where(_R.run_id == sa.bindparam("w_run_id"), _R.version == sa.bindparam("w_expected"))
            .values(
                state=sa.bindparam("w_state"), version=sa.bindparam("w_version"),
                updated_at=sa.bindparam("w_now"), head_hash=sa.bindparam("w_head"),
                **{name: sa.bindparam(f"w_{name}") for name in RUN_COUNT_FIELDS},
            ),
            dialect,
        )
        after = (_E.run_id == sa.bindparam("r_run_id"), _E.seq > sa.bindparam("r_after"))
        full = (_E.position, _E.seq, _E.type, _E.payload, _E.recorded_at, _E.schema_version)
        self.select_events = DriverStatement(
            sa.select(*full).where(*after).order_by(_E.seq), dialect
        )
        # OFFSET is always 0; binding it keeps SQLite's compiler from adding its own bind.
        limit = sa.bindparam("r_limit", type_=sa.Integer)
        offset = sa.bindparam("r_offset", type_=sa.Integer)
        self.select_events_chunk = DriverStatement(
            sa.select(*full).where(*after).order_by(_E.seq).limit(limit).offset(offset),
            dialect,
        )
        fold = (_E.seq, _E.type, _E.payload, _E.schema_version, _E.hash)
        self.select_fold = DriverStatement(
            sa.select(*fold).where(*after).order_by(_E.seq).limit(limit).offset(offset),
            dialect,
        )
        chain = (
            _E.seq, _E.type, _E.schema_version, _E.payload, _E.recorded_at, _E.prev_hash,
            _E.hash,
        )
        self.select_chain = DriverStatement(
            sa.select(*chain)
            .where(_E.run_id == sa.bindparam("c_run_id"), _E.seq > sa.bindparam("c_after"))
            .order_by(_E.seq),
            dialect,
        )
        # Raw driver rows skip result processing: fine for columns that have none;
        # recorded_at is converted by the reader; anything else keeps the Core path.
        plain = all(
            c.type.dialect_impl(dialect).result_processor(dialect, None) is None
            for c in full if c is not _E.recorded_at
        )
        plain = plain and all(
            c.type.dialect_impl(dialect).result_processor(dialect, None) is None
            for c in chain if c is not _E.recorded_at
        )
        if not plain:
            self.select_events.fast = self.select_fold.fast = self.select_chain.fast = False
            self.select_events_chunk.fast = False
        # The fence: a no-op UPDATE of our own lease row. Being an UPDATE, it waits on a
        # concurrent takeover's row lock (PostgreSQL) and then re-checks the token.
        self.fence = DriverStatement(
            leases_table.update()
            .where(
                _L.run_id == sa.bindparam("f_run_id"), _L.owner == sa.bindparam("f_owner"),
                _L.token == sa.bindparam("f_token"), _L.expires_at > _L.heartbeat_at,
            )
            .values(token=_L.token),
            dialect,
        )
        self.recorded_at = _E.recorded_at.type.dialect_impl(dialect).result_processor(
            dialect, None
        ) or (lambda value: value)


class EventStore(StoreCore):
    """Event store over SQLAlchemy; opening it upgrades the schema to head.

    ``read_only=True`` opens an existing store without writing anything (no migration,
    no journal-mode switch, every write refused), so an archived store on a read-only
    filesystem can be inspected; a store that is not at head is then refused with
    SchemaOutdated rather than migrated. ``must_exist`` refuses a missing SQLite file
    instead of creating it. Failures to open are :mod:`store.errors` classes.
    """

    def __init__(
        self, url: str | None = None, *, engine: Engine | None = None, read_only: bool = False,
        must_exist: bool = False, snapshot_every: int | None = None,
    ) -> None:
        super().__init__(snapshot_every=snapshot_every)
        self.read_only = read_only
        if must_exist and not read_only and engine is None:
            # Look before the writer connects: connecting switches the file to WAL, which
            # must not happen to a database that is then refused.
            probe = make_engine(url, read_only=True)
            try:
                check_writable_store(probe)
            finally:
                probe.dispose()
        elif engine is None and not read_only:
            create_sqlite_store(url)
        self.engine = engine or make_engine(url, read_only=read_only, must_exist=must_exist)
        try:
            if read_only:
                check_readable(self.engine)
            else:
                ensure_schema(self.engine, create=not must_exist)
        except BaseException:
            self.engine.dispose()
            raise
        self._sql = _Statements(self.engine.dialect)
        # Writers take the lock at BEGIN (SQLite); options bound once, same pool.
        self._writer = self.engine.execution_options(sqlite_begin="IMMEDIATE")

    @property
    def url(self) -> str:
        return safe_url(self.engine)

    def _where(self) -> str:
        return self.url

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_conn(self) -> Connection:
        return self._writer.connect()

    @contextmanager
    def _naming_holder(self, run_id: str) -> Iterator[None]:
        """A lock timeout names the session holding the run, when its lease says who.

        Reading the lease works while another process holds the write lock (WAL), so
        the message can say which session to wait for or stop."""
        try:
            yield
        except DatabaseLocked as error:
            try:
                holder = self.lease_info(run_id)
            except Exception as secondary:  # noqa: BLE001 - the lock error is the story
                error.add_note(f"reading the lease failed: {secondary}")
                raise error from error.__cause__
            if holder is None:
                raise
            raise error.held_by(held_message(holder)) from error.__cause__

    # -- reading ----------------------------------------------------------------------
    def _read_rows(self, run_id: str, after_seq: int) -> list[ReadRow]:
        """Event rows after ``after_seq`` with ``recorded_at`` as an aware UTC datetime.

        Rows come straight from the driver when the dialect allows it; ``recorded_at``
        is then converted here, once per distinct stored value (all events of one
        append share it), which is most of what Core's row processing would cost.
        """
        sql = self._sql
        with self.engine.connect() as conn:
            rows = sql.select_events.execute(
                conn, {"r_run_id": run_id, "r_after": after_seq}
            ).all()
        return self._convert(rows, sql.select_events.fast)

    def _convert(self, rows: Sequence, fast: bool) -> list[ReadRow]:
        convert = self._sql.recorded_at if fast else None
        seen: dict = {}
        out = []
        for position, seq, event_type, text, raw_at, schema_version in rows:
            at = seen.get(raw_at)
            if at is None:
                at = seen[raw_at] = as_utc(convert(raw_at) if convert else raw_at)
            out.append((position, seq, event_type, text, at, schema_version))
        return out

    def _iter_rows(self, run_id: str, after_seq: int) -> Iterator[ReadRow]:
        """Chunks of ``READ_CHUNK`` rows by seq (keyset): events are immutable and only
        appended, so the chunks together are one consistent prefix of the log."""
        stmt = self._sql.select_events_chunk
        with self.engine.connect() as conn:
            while True:
                rows = stmt.execute(
                    conn, {"r_run_id": run_id, "r_after": after_seq, "r_limit": READ_CHUNK,
                     "r_offset": 0}
                ).all()
                if not rows:
                    return
                yield from self._convert(rows, stmt.fast)
                if len(rows) < READ_CHUNK:
                    return
                after_seq = rows[-1][1]

    def _load(self, run_id: str, after_seq: int) -> Iterator[FoldRow]:
        stmt = self._sql.select_fold
        with self.engine.connect() as conn:
            while True:
                rows = stmt.execute(
                    conn, {"r_run_id": run_id, "r_after": after_seq, "r_limit": READ_CHUNK,
                     "r_offset": 0}
                ).all()
                yield from rows
                if len(rows) < READ_CHUNK:
                    return
                after_seq = rows[-1][0]

    # -- snapshots --------------------------------------------------------------------
    def _snapshot(self, run_id: str, kind: str) -> SnapshotRecord | None:
        query = sa.select(
            _S.run_id, _S.kind, _S.seq, _S.projection_version, _S.event_digest, _S.body_sha256,
            _S.body,
        ).where(_S.run_id == run_id, _S.kind == kind)
        with self.engine.connect() as conn:
            try:
                row = conn.execute(query).first()
            except (DBAPIError, SchemaMismatch) as exc:  # table gone or damaged: fold the log
                log.warning("snapshot_unreadable", run_id=run_id, kind=kind, error=str(exc))
                return None
        return None if row is None else SnapshotRecord(*row)

    def _event_digest(self, run_id: str, seq: int) -> str | None:
        query = sa.select(_E.type, _E.payload, _E.schema_version, _E.hash).where(
            _E.run_id == run_id, _E.seq == seq
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return event_digest(seq, row[0], row[1], row[2], row[3])

    def _put_snapshots(self, records: Sequence[SnapshotRecord]) -> None:
        if records:
            with self._write_conn() as conn, conn.begin():
                _store_snapshots(conn, records, utcnow())

    def _drop_snapshots(self, run_id: str, kinds: Sequence[str]) -> None:
        with self._write_conn() as conn, conn.begin():
            conn.execute(
                snapshots_table.delete().where(_S.run_id == run_id, _S.kind.in_(list(kinds)))
            )

    def _drop_snapshot_prefix(self, run_id: str, prefix: str) -> None:
        with self._write_conn() as conn, conn.begin():
            conn.execute(
                snapshots_table.delete().where(
                    _S.run_id == run_id, _S.kind.startswith(prefix, autoescape=True)
                )
            )

    def _run_exists(self, run_id: str) -> bool:
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(_R.run_id).where(_R.run_id == run_id)).first()
        return found is not None

    def _chain_rows(self, run_id: str, after_seq: int = 0) -> tuple[list, int | None, str | None]:
        sql = self._sql
        with self.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                run = conn.execute(
                    sa.select(_R.version, _R.head_hash).where(_R.run_id == run_id)
                ).first()
                rows = sql.select_chain.execute(
                    conn, {"c_run_id": run_id, "c_after": after_seq}
                ).all()
        convert = sql.recorded_at if sql.select_chain.fast else None
        seen: dict = {}
        out = []
        for seq, event_type, schema_version, text, raw_at, prev, digest in rows:
            at = seen.get(raw_at)
            if at is None:
                at = seen[raw_at] = as_utc(convert(raw_at) if convert else raw_at)
            out.append((seq, event_type, schema_version, text, at, prev, digest))
        if run is None:
            return out, None, None
        return out, run[0], run[1]

    def _hash_at(self, run_id: str, seq: int) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(
                sa.select(_E.hash).where(_E.run_id == run_id, _E.seq == seq)
            ).scalar()

    def _run_head(self, run_id: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(_R.head_hash).where(_R.run_id == run_id)).scalar()

    def list_runs(self) -> list[RunSummary]:
        query = sa.select(
            _R.run_id, _R.state, _R.version, _R.created_at, _R.updated_at, _R.goal, _R.task_id,
            *(getattr(_R, name) for name in RUN_COUNT_FIELDS),
        ).order_by(_R.created_at, _R.run_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [
            RunSummary(r[0], r[1], r[2], as_utc(r[3]), as_utc(r[4]), r[5], r[6], *r[7:])
            for r in rows
        ]

    def run_ids(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(_R.run_id).order_by(_R.run_id)).scalars())

    # -- writing ----------------------------------------------------------------------
    def _write(
        self, run_id: str, prepared: Sequence[PreparedEvent], expected_version: int,
        state: RunState, now: datetime, fence: Lease | None = None, *,
        snapshots: Sequence[SnapshotRecord] = (),
    ) -> None:
        try:
            with self._naming_holder(run_id), self._write_conn() as conn, conn.begin():
                if fence is not None:
                    self._check_fence(conn, fence)
                self._write_in(conn, run_id, prepared, expected_version, state, now)
                if snapshots:
                    _store_snapshots_best_effort(conn, snapshots, now)
        except DBAPIError as exc:
            if not is_write_conflict(exc):
                raise
            raise ConcurrencyError(
                f"run {run_id!r}: expected version {expected_version} is stale; "
                "another session appended first (concurrent transaction)"
            ) from exc

    def _write_in(
        self, conn: Connection, run_id: str, prepared: Sequence[PreparedEvent],
        expected_version: int, state: RunState, now: datetime,
    ) -> None:
        """The append's statements, inside the caller's transaction."""
        version = prepared[-1].seq
        head = prepared[-1].hash
        sql = self._sql
        counts = run_counts(state)
        if expected_version == 0:
            created = state.created or {}
            try:
                conn.execute(
                    runs_table.insert().values(
                        run_id=run_id, created_at=now, updated_at=now, state=state.state,
                        version=version, goal=created.get("goal"),
                        task_id=created.get("task_id"), head_hash=head, **counts,
                    )
                )
            except IntegrityError as exc:
                raise ConcurrencyError(
                    f"run {run_id!r} already exists; expected version 0 is stale"
                ) from exc
        else:
            # The compare-and-swap: one conditional UPDATE, its row count decides.
            result = sql.bump_run.execute(conn, {
                "w_run_id": run_id, "w_expected": expected_version,
                "w_state": state.state, "w_version": version, "w_now": now, "w_head": head,
                **{f"w_{name}": value for name, value in counts.items()},
            })
            if result.rowcount != 1:
                raise ConcurrencyError(
                    f"run {run_id!r}: expected version {expected_version} is stale; "
                    "another session appended first"
                )
        try:
            sql.insert_events.execute_rows(
                conn,
                {"run_id": run_id, "recorded_at": now, "schema_version": SCHEMA_VERSION},
                _EVENT_ROW_KEYS,
                [(e.seq, e.type, e.text, e.prev_hash, e.hash) for e in prepared],
            )
        except IntegrityError as exc:
            raise ConcurrencyError(
                f"run {run_id!r}: seq {prepared[0].seq} already exists"
            ) from exc

    def _check_fence(self, conn: Connection, lease: Lease) -> None:
        """Inside the caller's transaction: our lease row still carries our token."""
        result = self._sql.fence.execute(
            conn, {"f_run_id": lease.run_id, "f_owner": lease.owner, "f_token": lease.token}
        )
        if result.rowcount != 1:
            raise lease_lost(lease, self._lease_row(conn, lease.run_id))

    # -- leases -----------------------------------------------------------------------
    def lease_info(self, run_id: str) -> LeaseInfo | None:
        """The run's current holder, or None if nobody holds it (never held, or released)."""
        with self.engine.connect() as conn:
            row = self._lease_row(conn, run_id)
        return None if row is None or row.released else row

    @staticmethod
    def _lease_row(conn: Connection, run_id: str, lock: bool = False) -> LeaseInfo | None:
        query = sa.select(
            _L.run_id, _L.owner, _L.pid, _L.host, _L.acquired_at, _L.heartbeat_at, _L.expires_at,
            _L.token,
        ).where(_L.run_id == run_id)
        if lock:
            query = query.with_for_update()
        row = conn.execute(query).first()
        if row is None:
            return None
        return LeaseInfo(
            row[0], row[1], row[2], row[3], as_utc(row[4]), as_utc(row[5]), as_utc(row[6]),
            int(row[7]),
        )

    def _check_lease(self, lease: Lease) -> None:
        with self.engine.connect() as conn:
            row = self._lease_row(conn, lease.run_id)
        if not fenced_by(lease, row):
            raise lease_lost(lease, row)

    def acquire_lease(self, run_id: str, *, owner: str, ttl_s: float = 30.0) -> Lease:
        """Take the run's lease or raise LeaseHeld naming the live holder.

        An expired lease, or one on this host whose process is dead, is taken over and
        the takeover is appended to the run's log as ``LeaseTakenOver``. Every acquisition
        increments the row's fencing token, which fences out every earlier holder.
        """
        pid, host = os.getpid(), this_host()
        for _attempt in range(3):
            now = utcnow()
            expires = new_expiry(now, ttl_s)
            values = {
                "owner": owner, "pid": pid, "host": host, "acquired_at": now,
                "heartbeat_at": now, "expires_at": expires,
            }
            try:
                with self._naming_holder(run_id), self._write_conn() as conn, conn.begin():
                    current, mine = self._claim_lease(conn, run_id, values, now)
            except IntegrityError:
                continue  # another session inserted first; look again
            foreign = current is not None and not mine and not current.released
            lease = Lease(
                self, run_id, owner, pid, host, ttl_s, expires,
                taken_over=current if foreign else None, token=values["token"],
            )
            self._append_takeover(lease)
            return lease
        raise LeaseHeld(f"run {run_id!r}: lease contended, try again")

    def _claim_lease(
        self, conn: Connection, run_id: str, values: dict, now: datetime
    ) -> tuple[LeaseInfo | None, bool]:
        """Write our lease row unless a live foreign one exists (LeaseHeld then).

        Returns the row found before ours (None if there was none) and whether it was
        already ours. Race-free: the insert-if-absent waits for a concurrent inserter
        and the existing row is read under a row lock before it is overwritten; on
        dialects without insert-if-absent a lost insert race raises IntegrityError,
        which the caller retries.
        """
        values["token"] = 1
        if _insert_lease_if_absent(conn, run_id, values):
            return None, False
        current = self._lease_row(conn, run_id, lock=True)
        if current is None:  # absent and insert-if-absent unsupported
            conn.execute(leases_table.insert().values(run_id=run_id, **values))
            return None, False
        mine = current.held_by(values["owner"], values["pid"], values["host"])
        if not mine and not current.released and is_live(current, now, values["host"]):
            raise LeaseHeld(held_message(current))
        values["token"] = current.token + 1
        result = conn.execute(
            leases_table.update()
            .where(_L.run_id == run_id, _L.token == current.token)
            .values(**values)
        )
        if result.rowcount != 1:  # a concurrent takeover moved the token first
            raise LeaseHeld(f"run {run_id!r}: lease contended, try again")
        return current, mine

    def _renew_lease(self, lease: Lease) -> datetime:
        now = utcnow()
        expires = new_expiry(now, lease.ttl_s)
        with self._write_conn() as conn, conn.begin():
            result = conn.execute(
                leases_table.update()
                .where(*_holder(lease))
                .values(heartbeat_at=now, expires_at=expires)
            )
            if result.rowcount != 1:
                raise lease_lost(lease, self._lease_row(conn, lease.run_id))
        return expires

    def _release_lease(self, lease: Lease) -> None:
        """Mark the row released (the token stays for the next holder)."""
        now = utcnow()
        with self._write_conn() as conn, conn.begin():
            conn.execute(
                leases_table.update().where(*_holder(lease)).values(
                    heartbeat_at=now, expires_at=now
                )
            )


def _store_snapshots_best_effort(
    conn: Connection, records: Sequence[SnapshotRecord], now: datetime
) -> None:
    """Snapshots beside an append, in a savepoint: they are a cache, so failing to write one
    (a dropped or damaged table) is logged and never costs the events their commit."""
    try:
        with conn.begin_nested():
            _store_snapshots(conn, records, now)
    except SchemaMismatch as exc:  # the table is gone or altered
        log.warning("snapshot_not_written", run_id=records[0].run_id, error=str(exc))
    except DBAPIError as exc:
        if is_write_conflict(exc):
            raise
        log.warning("snapshot_not_written", run_id=records[0].run_id, error=str(exc))


def _store_snapshots(
    conn: Connection, records: Sequence[SnapshotRecord], now: datetime
) -> None:
    """Replace each (run, kind) snapshot by ``records`` (delete + insert: portable upsert)."""
    for record in records:
        conn.execute(
            snapshots_table.delete().where(
                _S.run_id == record.run_id, _S.kind == record.kind
            )
        )
    conn.execute(
        snapshots_table.insert(),
        [
            {
                "run_id": r.run_id, "kind": r.kind, "seq": r.seq,
                "projection_version": r.projection_version, "event_digest": r.event_digest,
                "body_sha256": r.body_sha256, "body": r.body, "created_at": now,
            }
            for r in records
        ],
    )


def _holder(lease: Lease) -> tuple:
    """WHERE clauses matching ``lease``'s row while it is held by it (same token)."""
    return (
        _L.run_id == lease.run_id, _L.owner == lease.owner, _L.token == lease.token,
        _L.expires_at > _L.heartbeat_at,
    )


def _insert_lease_if_absent(conn: Connection, run_id: str, values: dict) -> bool:
    """Insert the lease row unless one exists; True if inserted.

    Dialect-specific ``INSERT ... ON CONFLICT DO NOTHING`` (PostgreSQL, SQLite): on
    PostgreSQL it waits for a concurrent inserter of the same run instead of failing
    the transaction with a unique violation. Other dialects return False and take the
    portable path (locked read, then insert or update).
    """
    name = conn.dialect.name
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql

        stmt = postgresql.insert(leases_table).on_conflict_do_nothing(index_elements=[_L.run_id])
    elif name == "sqlite":
        from sqlalchemy.dialects import sqlite

        stmt = sqlite.insert(leases_table).on_conflict_do_nothing(index_elements=[_L.run_id])
    else:
        return False
    # RETURNING, not rowcount: psycopg reports no reliable rowcount for ON CONFLICT DO NOTHING.
    inserted = conn.execute(stmt.values(run_id=run_id, **values).returning(_L.run_id)).first()
    return inserted is not None
