"""Scenario 9: the database under the processes fails.

The connection holding a provisioning claim is killed with pg_terminate_backend while its pass
is between reading capacity and committing intents (held there by a lock a test connection
takes on the workers table, as a long migration or a stuck vacuum would): the claim is released,
a peer proceeds, the dead pass commits none of its intents and the peer all of its own, so the
demand is launched once. Then Postgres itself is restarted under a provisioner and a scanner in
the middle of their passes: they reconnect without a restart and nothing is lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from sqlalchemy import text

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import CapacitySampler, provider_config, sizes, wait_until
from tests.support.stack import Stack, pool
from wm.db import tasks
from wm.db.workers import list_workers

INTERVALS = {"provision_s": 0.3, "intent_recovery_s": 1.0}
WAITING_INSERTS = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    " AND wait_event_type = 'Lock' AND query ILIKE 'INSERT INTO workers%'"
)
CLAIM_HOLDERS = text(
    "SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.relation = 'worker_pools'::regclass AND l.mode = 'RowExclusiveLock'"
    " AND l.granted AND a.application_name = 'wm-provisioner'"
    " AND a.datname = current_database()"
)


@dataclass(frozen=True)
class Claim:
    demand: int
    runs: int = 1


def scalar(engine, statement):
    with engine.connect() as conn:
        return conn.execute(statement).scalar()


def claim_holders(engine) -> set[int]:
    with engine.connect() as conn:
        return set(conn.execute(CLAIM_HOLDERS).scalars())


@pytest.mark.parametrize("size", sizes(Claim(4), Claim(20, runs=5)))
def test_a_killed_claim_connection_lets_a_peer_launch_the_demand_once(
    size, tmp_path, db_url, engine, clouds, stacks, figures
):
    gcp = provider_config("gcp", clouds.gce)
    # Twice the demand would be over the max: a launch made twice shows at once.
    max_capacity = size.demand * size.runs + size.demand // 2
    stack = Stack.write(
        tmp_path, db_url, [gcp], [pool("proj/db", gcp, max_capacity)], intervals=INTERVALS
    )
    stacks.append(stack)
    stack.sync_pools(engine)
    first, second = stack.start("provisioner"), stack.start("provisioner")
    for process in (first, second):
        process.wait_for(lambda p=process: p.events("process-started"), 30, "start")

    with CapacitySampler(engine, {"proj/db": max_capacity}) as sampler:
        for _ in range(size.runs):
            launched = len(clouds.gce.instances())
            with engine.connect() as blocker, blocker.begin():
                # Reads go on; every INSERT into workers waits until this transaction ends.
                blocker.execute(text("LOCK TABLE workers IN SHARE MODE"))
                tasks.submit_tasks(engine, "proj/db", size.demand, 5.0)
                wait_until(lambda: scalar(engine, WAITING_INSERTS) == 1, 30, "a pass at INSERT")
                (killed,) = claim_holders(engine)
                assert scalar(engine, text(f"SELECT pg_terminate_backend({killed})"))
                # The claim died with its connection: the peer (or the same process's next
                # pass) claims the pool and goes on to its own INSERT.
                wait_until(
                    lambda k=killed: (
                        claim_holders(engine) - {k} and scalar(engine, WAITING_INSERTS) >= 1
                    ),
                    30,
                    "another pass claiming the pool",
                )
                # Its INSERT follows its claim within milliseconds; a pass of the dead claim
                # that went on would be waiting at its own INSERT by now too.
                time.sleep(0.5)
            wait_until(
                lambda before=launched: len(clouds.gce.instances()) >= before + size.demand,
                30,
                "the demand launched",
            )
            for process in (first, second):
                process.wait_for(lambda p=process: len(p.events("provision-pass")) > 3, 30, "")
            assert len(clouds.gce.instances()) == launched + size.demand
    rows = list_workers(engine, pool_id="proj/db")
    assert len(rows) == size.demand * size.runs  # the dead passes committed no intent at all
    assert sampler.over == []
    report = assert_no_leaks(engine, clouds.sims)
    figures.record(
        kills=size.runs,
        samples=sampler.samples,
        max_capacity_exceeded=len(sampler.over),
        vms=report.vms,
        vms_leaked=len(report.unmanaged),
        duplicates=len(report.duplicates),
    )
