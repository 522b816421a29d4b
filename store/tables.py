"""SQLModel tables of the event store.

The schema itself is created only by the Alembic revisions in ``migrations/``;
these classes describe it for queries, and a test checks the two agree.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel


class RunRow(SQLModel, table=True):
    """One run; ``state``, ``version`` and ``head_hash`` (its last event's chain hash)
    cache the log, written in the same transaction as the events."""

    __tablename__ = "runs"

    run_id: str = Field(sa_column=sa.Column(sa.String(200), primary_key=True))
    created_at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    updated_at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    state: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    goal: str | None = Field(default=None, sa_column=sa.Column(sa.String(32), nullable=True))
    task_id: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    head_hash: str | None = Field(
        default=None, sa_column=sa.Column(sa.String(64), nullable=True)
    )


class EventRow(SQLModel, table=True):
    """One immutable event; ``seq`` counts from 1 per run without gaps."""

    __tablename__ = "events"
    __table_args__ = (
        sa.UniqueConstraint("run_id", "seq", name="uq_events_run_seq"),
        {"sqlite_autoincrement": True},
    )

    position: int | None = Field(
        default=None, sa_column=sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    )
    run_id: str = Field(
        sa_column=sa.Column(
            sa.String(200), sa.ForeignKey("runs.run_id", name="fk_events_run"), nullable=False
        )
    )
    seq: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    type: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    payload: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    recorded_at: datetime = Field(
        sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False)
    )
    schema_version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    # The hash chain (domain/chain.py). Nullable only so that a row written around the
    # store (which has none) is reported by verify as unchained instead of refused.
    prev_hash: str | None = Field(
        default=None, sa_column=sa.Column(sa.String(64), nullable=True)
    )
    hash: str | None = Field(default=None, sa_column=sa.Column(sa.String(64), nullable=True))


class LeaseRow(SQLModel, table=True):
    """The single live session allowed to drive a run.

    ``token`` is the fencing token: every acquisition increments it, and every durable effect
    of a session checks it, so a holder that was taken over can no longer write. A released
    lease keeps its row (``expires_at == heartbeat_at``) so the token never goes back.
    """

    __tablename__ = "leases"

    run_id: str = Field(sa_column=sa.Column(sa.String(200), primary_key=True))
    owner: str = Field(sa_column=sa.Column(sa.String(200), nullable=False))
    pid: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    host: str = Field(sa_column=sa.Column(sa.String(255), nullable=False))
    acquired_at: datetime = Field(
        sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False)
    )
    heartbeat_at: datetime = Field(
        sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False)
    )
    expires_at: datetime = Field(sa_column=sa.Column(sa.DateTime(timezone=True), nullable=False))
    token: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )


runs_table: sa.Table = RunRow.__table__  # type: ignore[attr-defined]
events_table: sa.Table = EventRow.__table__  # type: ignore[attr-defined]
leases_table: sa.Table = LeaseRow.__table__  # type: ignore[attr-defined]
STORE_METADATA: sa.MetaData = SQLModel.metadata
