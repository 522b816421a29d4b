"""Initial store schema: runs, events (immutable), leases.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TZ = sa.DateTime(timezone=True)

_SQLITE_TRIGGERS = (
    """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE refused'); END""",
    """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE refused'); END""",
)

# SQLSTATE class 23 makes drivers raise IntegrityError, as SQLite's RAISE(ABORT) does,
# so callers see the same exception class on both dialects.
_POSTGRES_TRIGGERS = (
    """CREATE FUNCTION assetcast_events_immutable() RETURNS trigger AS $$
    BEGIN
        RAISE EXCEPTION 'events are immutable: % refused', TG_OP
            USING ERRCODE = 'integrity_constraint_violation';
    END;
    $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER events_immutable BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION assetcast_events_immutable()""",
    """CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION assetcast_events_immutable()""",
)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("updated_at", _TZ, nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("goal", sa.String(32), nullable=True),
        sa.Column("task_id", sa.Text, nullable=True),
    )
    op.create_table(
        "events",
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "run_id", sa.String(200), sa.ForeignKey("runs.run_id", name="fk_events_run"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("recorded_at", _TZ, nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.UniqueConstraint("run_id", "seq", name="uq_events_run_seq"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "leases",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("acquired_at", _TZ, nullable=False),
        sa.Column("heartbeat_at", _TZ, nullable=False),
        sa.Column("expires_at", _TZ, nullable=False),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in _SQLITE_TRIGGERS:
            op.execute(statement)
    elif dialect == "postgresql":
        for statement in _POSTGRES_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS events_no_update")
        op.execute("DROP TRIGGER IF EXISTS events_no_delete")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_immutable ON events")
        op.execute("DROP TRIGGER IF EXISTS events_no_truncate ON events")
        op.execute("DROP FUNCTION IF EXISTS assetcast_events_immutable()")
    op.drop_table("leases")
    op.drop_table("events")
    op.drop_table("runs")
