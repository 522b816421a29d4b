"""Tables of the event store, as SQLAlchemy Core ``Table`` objects.

The schema itself is created only by the Alembic revisions in ``migrations/``;
these objects describe it for queries, and a test checks the two agree.

Why Core tables and not SQLModel classes: the store only ever issues Core statements,
and declaring the schema through SQLModel imported pydantic (and SQLAlchemy's ORM) into
every command, a third of a read-only command's start-up for nothing it used.
"""

from __future__ import annotations

import sqlalchemy as sa

STORE_METADATA = sa.MetaData()

_UTC_TIME = sa.DateTime(timezone=True)

runs_table = sa.Table(
    "runs",
    STORE_METADATA,
    # One run; ``state``, ``version`` and ``head_hash`` (its last event's chain hash) cache
    # the log, written in the same transaction as the events.
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("created_at", _UTC_TIME, nullable=False),
    sa.Column("updated_at", _UTC_TIME, nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("goal", sa.String(32), nullable=True),
    sa.Column("task_id", sa.Text, nullable=True),
    sa.Column("head_hash", sa.String(64), nullable=True),
    # Cached counts of the fold (migration 0003), so `runs` reads no events. NULL on rows
    # written before that migration until their next append.
    sa.Column("output_dir", sa.Text, nullable=True),
    sa.Column("last_event_type", sa.String(64), nullable=True),
    sa.Column("batches_total", sa.Integer, nullable=True),
    sa.Column("batches_resolved", sa.Integer, nullable=True),
    sa.Column("batches_done", sa.Integer, nullable=True),
    sa.Column("episodes_attempted", sa.Integer, nullable=True),
    sa.Column("episodes_accepted", sa.Integer, nullable=True),
    sa.Column("trajectories_committed", sa.Integer, nullable=True),
    sa.Column("failures", sa.Integer, nullable=True),
    sa.Column("resumes", sa.Integer, nullable=True),
)

events_table = sa.Table(
    "events",
    STORE_METADATA,
    # One immutable event; ``seq`` counts from 1 per run without gaps.
    sa.Column("position", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "run_id", sa.String(200), sa.ForeignKey("runs.run_id", name="fk_events_run"),
        nullable=False,
    ),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("recorded_at", _UTC_TIME, nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    # The hash chain (domain/chain.py). Nullable only so that a row written around the
    # store (which has none) is reported by verify as unchained instead of refused.
    sa.Column("prev_hash", sa.String(64), nullable=True),
    sa.Column("hash", sa.String(64), nullable=True),
    sa.UniqueConstraint("run_id", "seq", name="uq_events_run_seq"),
    sqlite_autoincrement=True,
)

leases_table = sa.Table(
    "leases",
    STORE_METADATA,
    # The single live session allowed to drive a run. ``token`` is the fencing token: every
    # acquisition increments it, and every durable effect of a session checks it, so a
    # holder that was taken over can no longer write. A released lease keeps its row
    # (``expires_at == heartbeat_at``) so the token never goes back.
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("acquired_at", _UTC_TIME, nullable=False),
    sa.Column("heartbeat_at", _UTC_TIME, nullable=False),
    sa.Column("expires_at", _UTC_TIME, nullable=False),
    sa.Column("token", sa.Integer, nullable=False, server_default="0"),
)

snapshots_table = sa.Table(
    "snapshots",
    STORE_METADATA,
    # A cached projection of one run at ``seq`` (the fold, a named report, the chain
    # anchor). A cache, never a source of truth: used only when ``projection_version`` is
    # the code's, ``body_sha256`` matches ``body`` and ``event_digest`` matches the event
    # now at ``seq``; otherwise it is ignored and the log is folded.
    sa.Column(
        "run_id", sa.String(200), sa.ForeignKey("runs.run_id", name="fk_snapshots_run"),
        primary_key=True,
    ),
    sa.Column("kind", sa.String(64), primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("projection_version", sa.Integer, nullable=False),
    sa.Column("event_digest", sa.String(64), nullable=False),
    sa.Column("body_sha256", sa.String(64), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", _UTC_TIME, nullable=False),
)
