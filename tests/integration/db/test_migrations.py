from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from wm.db import migrate
from wm.db.engine import make_engine
from wm.db.tables import metadata


def test_upgrade_creates_every_table_and_a_second_upgrade_is_a_no_op(empty_db_url):
    engine = make_engine(empty_db_url)
    before, after = migrate.upgrade(engine)
    assert (before, after) == (None, migrate.head_revision())
    tables = set(inspect(engine).get_table_names())
    assert {"worker_pools", "launch_configs", "workers", "worker_pool_errors", "tasks"} <= tables

    again = migrate.upgrade(engine)
    assert again == (after, after)
    engine.dispose()


def test_migrated_schema_matches_the_table_definitions(engine):
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []
