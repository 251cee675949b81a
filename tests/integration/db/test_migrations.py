from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from wm.db import migrate, schema
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


def test_the_revisions_a_process_reads_from_the_files_are_alembics():
    # A running process reads them without alembic (its start-up); alembic is the authority.
    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    head, known = schema.revisions()
    assert head == scripts.get_current_head()
    assert known == {r.revision for r in scripts.walk_revisions()}
