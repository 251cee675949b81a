"""What a provisioning pass reads: aggregates, not every worker row.

A pass's statements do not grow with its pools or their workers, and the scale-down advice,
which reads only the newest running workers of pools with capacity to spare, flags exactly the
workers that the advice over every running worker (lifecycle.scale_down, what the pass read
before) flags."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, event, text

from tests.support.configs import build, raw
from tests.support.definitions import apply_pools
from tests.support.memory_provider import MemoryProvider
from wm.db import pools as pool_store
from wm.db import tasks
from wm.db.engine import create_database, drop_database, make_engine, with_database
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker, list_workers
from wm.model import WorkerState
from wm.provisioning import estimator
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.workers import lifecycle
from wmsim.postgres import PostgresServer

POOL = "proj/linux"
R, Q, S = WorkerState.RUNNING, WorkerState.REQUESTED, WorkerState.STOPPING


@dataclass(frozen=True)
class Row:
    worker_id: str
    age_min: int  # created this many minutes ago: a smaller age is newer
    capacity: int = 1
    state: WorkerState = R
    advised: bool = False  # should_terminate before the pass


@dataclass(frozen=True)
class Fleet:
    name: str
    rows: tuple[Row, ...]
    pending: int
    flagged: frozenset[str]  # the running workers advised to terminate after the pass
    min_capacity: int = 0
    max_capacity: int = 100
    scaling_ratio: float = 1.0


def running(*ids: str, capacity: int = 1) -> tuple[Row, ...]:
    """Running workers, the first the oldest."""
    return tuple(Row(w, len(ids) - n, capacity) for n, w in enumerate(ids))


FLEETS = [
    Fleet("demand met", running("a", "b", "c", "d", "e"), 5, frozenset()),
    Fleet("demand gone", running("a", "b", "c", "d", "e"), 0, frozenset("abcde")),
    Fleet("part surplus", running("a", "b", "c", "d", "e", "f"), 2, frozenset("cdef")),
    Fleet(
        "one batch, one created: ids in code point order",
        tuple(Row(w, 3) for w in ("wA", "wa", "w_", "w-", "wZ", "w0")),
        2,
        frozenset({"wa", "w_", "wZ", "wA"}),
    ),
    Fleet(
        "stops at the first worker that does not fit",
        (Row("old1", 9), Row("old2", 8), Row("big", 7, 4), Row("new1", 2), Row("new2", 1)),
        3,
        frozenset({"new1", "new2"}),
    ),
    Fleet(
        "capacity 0 spares nothing and is flagged on the way",
        (Row("a", 9), Row("b", 8), Row("z1", 3, 0), Row("c", 2), Row("z2", 1, 0)),
        2,
        frozenset({"z2", "c", "z1"}),
    ),
    Fleet(
        "advice withdrawn where the demand came back",
        (Row("a", 9, advised=True), Row("b", 8, advised=True), Row("c", 1, advised=True)),
        3,
        frozenset(),
    ),
    Fleet(
        "advice moves from an old worker to the newest",
        (Row("a", 9, advised=True), Row("b", 8), Row("c", 7), Row("d", 1)),
        3,
        frozenset({"d"}),
    ),
    Fleet("min capacity holds", running("a", "b", "c", "d", "e"), 0, frozenset("de"), 3),
    Fleet(
        "max capacity caps the target",
        running("a", "b", "c", "d", "e", "f"),
        20,
        frozenset("ef"),
        max_capacity=4,
    ),
    Fleet(
        "a fractional target",
        running("a", "b", "c", "d"),
        3,
        frozenset("cd"),
        scaling_ratio=0.5,
    ),
    Fleet(
        "only running workers count and are flagged",
        (
            *running("a", "b", "c"),
            Row("q", 0, state=Q),
            Row("s", 0, state=S, advised=True),
        ),
        1,
        frozenset("bc"),
    ),
    Fleet(
        "capacities above 1",
        (Row("a", 9, 2), Row("b", 8, 2), Row("c", 2, 3), Row("d", 1, 2)),
        3,
        frozenset({"d", "c"}),
    ),
]


def sync_pools(engine: Engine, pool_ids: Sequence[str], **fields: object) -> None:
    data = raw()
    data["pools"] = [{**data["pools"][0], "id": pool_id, **fields} for pool_id in pool_ids]
    apply_pools(engine, build(data), data["pools"], prune=True)


def write_fleet(engine: Engine, pool_id: str, rows: Sequence[Row]) -> None:
    """The rows as they would stand after passes and scans (tests may set any column)."""
    (lc, *_) = pool_store.load_launch_configs(engine, pool_ids=[pool_id])
    insert_intents(
        engine,
        [
            NewWorker(
                worker_id=row.worker_id,
                pool_id=pool_id,
                worker_group=lc.region,
                provider_id="aws-a",
                capacity=row.capacity,
                launch_config_id=lc.launch_config_id,
                idempotency_token=str(uuid.uuid4()),
                batch_token=uuid.uuid4().hex,
                launch_index=0,
                expires_in_s=3600.0,
            )
            for row in rows
        ],
    )
    with engine.begin() as conn:
        for row in rows:
            conn.execute(
                text(
                    "UPDATE workers SET state = :state, should_terminate = :advised,"
                    " cloud_id = 'i-' || worker_id,"
                    " created = timestamptz '2030-01-01 00:00Z' - make_interval(mins => :age)"
                    " WHERE worker_id = :id"
                ),
                {
                    "state": row.state.value,
                    "advised": row.advised,
                    "age": row.age_min,
                    "id": row.worker_id,
                },
            )


def provisioner(engine: Engine) -> Provisioner:
    aws = MemoryProvider("aws-a", ("us-east-1", "us-west-2"))
    return Provisioner(engine, BuiltinQueue(engine), {"aws-a": aws})


@pytest.mark.parametrize("fleet", FLEETS, ids=[f.name for f in FLEETS])
def test_the_advice_flags_what_the_advice_over_every_running_worker_flags(engine, fleet):
    sync_pools(
        engine,
        [POOL],
        min_capacity=fleet.min_capacity,
        max_capacity=fleet.max_capacity,
        scaling_ratio=fleet.scaling_ratio,
    )
    write_fleet(engine, POOL, fleet.rows)
    if fleet.pending:
        tasks.submit_tasks(engine, POOL, fleet.pending, 1.0)
    target = estimator.target_capacity(
        pending=fleet.pending,
        claimed=0,
        min_capacity=fleet.min_capacity,
        max_capacity=fleet.max_capacity,
        scaling_ratio=fleet.scaling_ratio,
    )
    before = [w for w in list_workers(engine, pool_id=POOL) if w.state == R]

    provisioner(engine).run_pass("aws-a")

    after = {w.worker_id: w for w in list_workers(engine, pool_id=POOL)}
    flagged = {w for w, row in after.items() if row.state == R and row.should_terminate}
    assert flagged == fleet.flagged == set(lifecycle.scale_down(before, target))
    # Workers that are not running keep what they had.
    for row in fleet.rows:
        if row.state != R:
            assert after[row.worker_id].should_terminate == row.advised


def test_ids_of_one_batch_are_read_in_pythons_order_whatever_the_collation(engine):
    """A database whose text collation is a language's (en: case and punctuation come after
    the letters) orders ids unlike Python; the advice must not follow it."""
    with engine.begin() as conn:
        if not conn.execute(text("SELECT 1 FROM pg_collation WHERE collname = 'en-x-icu'")).first():
            pytest.skip("this Postgres has no ICU collation")
        conn.execute(
            text('ALTER TABLE workers ALTER COLUMN worker_id TYPE text COLLATE "en-x-icu"')
        )
        assert conn.execute(text("SELECT 'wa' < 'wZ' COLLATE \"en-x-icu\"")).scalar()
    (fleet,) = [f for f in FLEETS if f.name.startswith("one batch")]
    test_the_advice_flags_what_the_advice_over_every_running_worker_flags(engine, fleet)


class Statements:
    def __init__(self, engine: Engine) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *_args: object) -> None:
        self.count += 1


def pass_statements(engine: Engine, pools: int, workers: int) -> dict[str, int]:
    """Statements of a steady pass, of the pass that finds every worker surplus and flags
    them, and of the one after it (the advice stands), over `pools` pools of `workers`
    running workers each, as many pending tasks as workers."""
    pool_ids = [f"proj/linux-{n:03d}" for n in range(pools)]
    sync_pools(engine, pool_ids, max_capacity=workers * 2)
    for pool_id in pool_ids:
        write_fleet(engine, pool_id, running(*(f"{pool_id}-w{n:04d}" for n in range(workers))))
        tasks.submit_tasks(engine, pool_id, workers, 1.0)
    p = provisioner(engine)
    p.run_pass("aws-a")  # the first look at the pools, whatever it does
    statements = Statements(engine)
    counts = {}
    for situation in ("steady", "surplus", "advice stands"):
        if situation == "surplus":
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM tasks"))
        statements.count = 0
        reports = p.run_pass("aws-a")
        counts[situation] = statements.count
        assert len(reports) == pools and not any(r.launched for r in reports)
    flagged = [w for w in list_workers(engine) if w.should_terminate]
    assert len(flagged) == pools * workers
    return counts


@contextlib.contextmanager
def fresh_engine(pg_server: PostgresServer, template_db: str) -> Iterator[Engine]:
    """A database of its own, for a fleet of another size."""
    name = f"wm_test_{uuid.uuid4().hex[:12]}"
    create_database(pg_server.url, name, template=template_db)
    engine = make_engine(with_database(pg_server.url, name))
    try:
        yield engine
    finally:
        engine.dispose()
        drop_database(pg_server.url, name)


@pytest.mark.parametrize(("pools", "workers"), [(12, 3), (2, 40), (12, 40)])
def test_a_pass_makes_as_many_statements_at_any_number_of_pools_and_workers(
    engine, pg_server, template_db, pools, workers
):
    with fresh_engine(pg_server, template_db) as other:
        small = pass_statements(other, 2, 3)

    assert pass_statements(engine, pools, workers) == small
