from datetime import UTC, datetime, timedelta

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from tests.support.configs import build, raw
from tests.support.definitions import apply_pools
from wm.db import migrate, offering_state, schema
from wm.db import pools as pool_store
from wm.db.engine import make_engine
from wm.db.tables import metadata
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker
from wm.model import Offering, OfferingSignal, SignalKind

POOL = "proj/linux"
EAST = Offering("us-east-1", None, "m5.large", "spot")


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


def test_an_upgrade_over_0011_keeps_the_refusals_and_signals_it_finds(empty_db_url):
    # Scenario: a deployment at revision 0011 holds a worker whose create was refused for
    # capacity, one whose GCE operation failed later, and a price read a while ago.
    engine = make_engine(empty_db_url)
    migrate.upgrade(engine)
    data = raw()
    apply_pools(engine, build(data), data["pools"])
    (lc, *_) = [lc for lc in pool_store.load_launch_configs(engine) if lc.pool_id == POOL]
    reasons = {
        "w-refused": "launch failed: capacity InsufficientInstanceCapacity",
        "w-late": "gce-operation-failed: ZONE_RESOURCE_POOL_EXHAUSTED: no n2 in us-central1-a",
    }
    insert_intents(
        engine,
        [
            NewWorker(w, POOL, lc.region, "aws-a", 1, lc.launch_config_id, w, "b", 0, 900.0)
            for w in reasons
        ],
    )
    observed = datetime(2026, 12, 1, 12, tzinfo=UTC)
    price = OfferingSignal("aws-a", EAST, SignalKind.PRICE, 0.05, "test", observed)
    offering_state.write_signals(engine, [price], fresh_for_s=600.0)
    _downgrade(engine, "0011")
    with engine.begin() as conn:
        for worker_id, reason in reasons.items():
            conn.execute(
                text("UPDATE workers SET stop_reason = :r WHERE worker_id = :w"),
                {"r": reason, "w": worker_id},
            )

    migrate.upgrade(engine)

    # Outcome: the create refused for capacity is counted as one (the late one's reason is
    # the cloud's own words: the scan classes those from now on), and the price is kept, good
    # for a day after it was read.
    with engine.connect() as conn:
        refused = dict(conn.execute(text("SELECT worker_id, launch_refused FROM workers")).all())
        fresh_until = conn.execute(text("SELECT fresh_until FROM offering_signals")).scalar_one()
    assert refused == {"w-refused": "capacity", "w-late": None}
    assert fresh_until == observed + timedelta(days=1)
    engine.dispose()


def _downgrade(engine, revision: str) -> None:
    config = migrate.alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
