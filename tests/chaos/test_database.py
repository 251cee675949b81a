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
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import text

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import (
    CREATE_OPERATION,
    KINDS,
    CapacitySampler,
    provider_config,
    sizes,
    wait_until,
)
from tests.support.stack import START_TIMEOUT_S, Stack, pool
from wm.db import migrate, tasks
from wm.db.engine import create_database, make_engine, with_database
from wm.db.workers import list_workers
from wm.model import WorkerState
from wmsim.postgres import PostgresServer, local_bin_dir, start_local_cluster

INTERVALS = {"provision_s": 0.3}
WAITING_INSERTS = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    " AND wait_event_type = 'Lock' AND query ILIKE 'INSERT INTO workers%'"
)
# Backends of wm-provisioner processes holding a pool claim (an advisory lock) in this database.
CLAIM_HOLDERS = text(
    "SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'wm-provisioner'"
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
        process.wait_for(process.started, START_TIMEOUT_S, "start")

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
            wait_until(
                lambda: all(r.cloud_id for r in list_workers(engine, pool_id="proj/db")),
                30,
                "the launches recorded",
            )
            assert len(clouds.gce.instances()) == launched + size.demand
            with engine.begin() as conn:  # they boot and register: the next demand is new
                conn.execute(text("UPDATE workers SET state = 'running'"))
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


@pytest.fixture
def restartable_db() -> Iterator[tuple[PostgresServer, str]]:
    """A Postgres cluster of this test's own, migrated, that the test may restart."""
    bin_dir = local_bin_dir()
    if bin_dir is None:
        pytest.skip("restarting Postgres needs the PostgreSQL server binaries on this machine")
    server = start_local_cluster(bin_dir)
    try:
        create_database(server.url, "wm_restart")
        url = with_database(server.url, "wm_restart")
        engine = make_engine(url)
        migrate.upgrade(engine)
        engine.dispose()
        yield server, url
    finally:
        server.stop()


@dataclass(frozen=True)
class Restart:
    demand: int  # tasks per pool, before and again after the restart
    restarts: int = 1


@pytest.mark.parametrize("size", sizes(Restart(4), Restart(10, restarts=3)))
def test_processes_ride_out_a_postgres_restart_and_lose_nothing(
    size, tmp_path, restartable_db, clouds, stacks, figures
):
    server, url = restartable_db
    # Every cloud call takes a while: the restart finds passes and scans in flight.
    for sim in clouds.sims:
        sim.faults.behaviour.update(latency_ms=800)
    providers = [provider_config(k, clouds.of(k), scan_interval_s=0.5) for k in KINDS]
    pools = [
        pool(f"proj/{k}", p, 100, requires_registration=False)
        for k, p in zip(KINDS, providers, strict=True)
    ]
    stack = Stack.write(tmp_path, url, providers, pools, intervals=INTERVALS)
    stacks.append(stack)
    engine = make_engine(url)
    try:
        stack.sync_pools(engine)
        processes = [stack.start("provisioner"), stack.start("provisioner"), stack.start("scanner")]
        for process in processes:
            process.wait_for(process.started, START_TIMEOUT_S, "start")
        wanted = 0
        for _ in range(size.restarts):
            wanted += size.demand
            for kind in KINDS:
                tasks.submit_tasks(engine, f"proj/{kind}", size.demand, 5.0)
            wait_until(
                lambda: all(
                    s.faults.counts().get(CREATE_OPERATION[k])
                    for k, s in zip(KINDS, clouds.sims, strict=True)
                ),
                30,
                "creates in flight on every cloud",
            )
            server.restart(down_s=1.0)
            restarted_at = time.time()
            wait_until(lambda w=wanted: settled(engine, clouds, w), 60, "the demand running")
            for process in processes:
                assert process.popen.poll() is None, "a process died with the database"
                process.wait_for(
                    lambda p=process, since=restarted_at: any(
                        e["ts"] > since
                        for e in p.lines
                        if e.get("event") in ("provision-pass", "scan")
                    ),
                    30,
                    "a pass after the restart",
                )
        # New demand after the last restart is served by the same processes.
        wanted += size.demand
        for kind in KINDS:
            tasks.submit_tasks(engine, f"proj/{kind}", size.demand, 5.0)
        wait_until(lambda: settled(engine, clouds, wanted), 60, "the new demand running")
        rows = list_workers(engine)
        assert len(rows) == 3 * wanted  # every intent made its VM: none half-written, none lost
        report = assert_no_leaks(engine, clouds.sims)
        failed = sum(len(p.events("pass-failed")) for p in processes)
        figures.record(
            restarts=size.restarts,
            vms=report.vms,
            vms_leaked=len(report.unmanaged),
            rows_lost=len(report.lost),
            duplicates=len(report.duplicates),
            passes_failed_while_down=failed,
            process_restarts=0,
        )
    finally:
        engine.dispose()


def settled(engine, clouds, per_pool: int) -> bool:
    """Every pool has exactly its demand of VMs, each with a running row."""
    rows = list_workers(engine)
    vms = [vm for sim in clouds.sims for vm in sim.instances()]
    running = [r for r in rows if r.state == WorkerState.RUNNING and r.cloud_id]
    return len(vms) == 3 * per_pool and len(running) == 3 * per_pool
