"""Hash chain: events.prev_hash / events.hash and runs.head_hash, backfilled in order.

Revision ID: 0002_hash_chain
Revises: 0002_lease_token (developed on 0001_initial; the lease token landed first)
Create Date: 2026-12-01

The backfill is the only UPDATE the events table ever sees: the immutability triggers are
lifted for it and restored in the same transaction, so a failed upgrade leaves them as
they were. Existing logs are chained exactly as the store chains new appends
(domain/chain.py), run by run in seq order.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from domain.chain import GENESIS, event_hash, time_text

revision: str = "0002_hash_chain"
down_revision: str | None = "0002_lease_token"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_TRIGGERS = {
    "events_no_update": """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE refused'); END""",
}

_events = sa.table(
    "events",
    sa.column("position", sa.Integer), sa.column("run_id", sa.String),
    sa.column("seq", sa.Integer), sa.column("type", sa.String), sa.column("payload", sa.Text),
    sa.column("recorded_at", sa.DateTime(timezone=True)),
    sa.column("schema_version", sa.Integer),
    sa.column("prev_hash", sa.String), sa.column("hash", sa.String),
)
_runs = sa.table("runs", sa.column("run_id", sa.String), sa.column("head_hash", sa.String))


def _lift_update_trigger(dialect: str) -> None:
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS events_no_update")
    elif dialect == "postgresql":
        op.execute("ALTER TABLE events DISABLE TRIGGER events_immutable")


def _restore_update_trigger(dialect: str) -> None:
    if dialect == "sqlite":
        op.execute(_SQLITE_TRIGGERS["events_no_update"])
    elif dialect == "postgresql":
        op.execute("ALTER TABLE events ENABLE TRIGGER events_immutable")


def _backfill(conn: sa.Connection) -> None:
    run_ids = [r[0] for r in conn.execute(sa.select(_runs.c.run_id).order_by(_runs.c.run_id))]
    for run_id in run_ids:
        rows = conn.execute(
            sa.select(
                _events.c.position, _events.c.seq, _events.c.type, _events.c.payload,
                _events.c.recorded_at, _events.c.schema_version,
            ).where(_events.c.run_id == run_id).order_by(_events.c.seq)
        ).all()
        prev = GENESIS
        updates = []
        for position, seq, event_type, payload, recorded_at, schema_version in rows:
            digest = event_hash(
                run_id, seq, event_type, schema_version, payload, time_text(recorded_at), prev
            )
            updates.append({"p": position, "prev": prev, "h": digest})
            prev = digest
        if updates:
            conn.execute(
                _events.update().where(_events.c.position == sa.bindparam("p")).values(
                    prev_hash=sa.bindparam("prev"), hash=sa.bindparam("h")
                ),
                updates,
            )
            conn.execute(
                _runs.update().where(_runs.c.run_id == run_id).values(head_hash=prev)
            )


def upgrade() -> None:
    op.add_column("events", sa.Column("prev_hash", sa.String(64), nullable=True))
    op.add_column("events", sa.Column("hash", sa.String(64), nullable=True))
    op.add_column("runs", sa.Column("head_hash", sa.String(64), nullable=True))
    dialect = op.get_bind().dialect.name
    _lift_update_trigger(dialect)
    _backfill(op.get_bind())
    _restore_update_trigger(dialect)


def downgrade() -> None:
    op.drop_column("runs", "head_hash")
    op.drop_column("events", "hash")
    op.drop_column("events", "prev_hash")
