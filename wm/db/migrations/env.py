"""Alembic environment, configured in code by wm/db/migrate.py (no alembic.ini)."""

from alembic import context
from sqlalchemy import text

from wm.db.tables import metadata

# One migration at a time across every replica and release phase.
MIGRATION_LOCK_ID = 0x776D_6D69  # "wmmi"
LOCK_TIMEOUT = "60s"
STATEMENT_TIMEOUT = "300s"


def run_migrations_online() -> None:
    connection = context.config.attributes["connection"]
    connection.execute(text(f"SET lock_timeout = '{LOCK_TIMEOUT}'"))
    connection.execute(text(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
    connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
