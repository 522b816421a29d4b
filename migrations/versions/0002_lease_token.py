"""Fencing tokens: every lease takeover increments ``leases.token``.

A lease row is no longer deleted on release (it is marked released instead), so the token
keeps growing across sessions and a stale holder can always be told from the current one.

Revision ID: 0002_lease_token
Revises: 0001_initial
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_lease_token"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.add_column(sa.Column("token", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("token")
