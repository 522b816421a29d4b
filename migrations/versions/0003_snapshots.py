"""Snapshots of the fold and of projections; cached run counts on ``runs``.

Revision ID: 0003_snapshots
Revises: 0002_hash_chain
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_snapshots"
down_revision: str | None = "0002_hash_chain"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUN_COUNTS = (
    "batches_total", "batches_resolved", "batches_done", "episodes_attempted",
    "episodes_accepted", "trajectories_committed", "failures", "resumes",
)


def upgrade() -> None:
    op.create_table(
        "snapshots",
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
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("output_dir", sa.Text, nullable=True))
        batch.add_column(sa.Column("last_event_type", sa.String(64), nullable=True))
        for name in _RUN_COUNTS:
            batch.add_column(sa.Column(name, sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name in (*reversed(_RUN_COUNTS), "last_event_type", "output_dir"):
            batch.drop_column(name)
    op.drop_table("snapshots")
