"""Alembic environment for the assetcast store.

Used both programmatically (store/admin.py passes an open connection in
``config.attributes["connection"]`` so the upgrade runs inside the caller's
transaction) and from the alembic command line (it then builds its own engine with
the same SQLite settings as the store).
"""

from __future__ import annotations

from alembic import context

from store.engine import make_engine, resolve_url
from store.tables import STORE_METADATA

config = context.config
target_metadata = STORE_METADATA


def _configure_and_run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        transactional_ddl=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=resolve_url(config.get_main_option("sqlalchemy.url")),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as conn:
            _configure_and_run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
