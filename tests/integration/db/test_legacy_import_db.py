"""`wm import`'s transaction on Postgres: pools and adopted workers written together, a second
import adding only what is new, and a refusal or a dry run writing nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from wm.db import pools as pool_store
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wm.take_over.import_plan import LegacyPool, LegacyWorker, ProviderFacts
from wm.take_over.importer import Imported, ImportRefused, import_fleet
from wm.take_over.marks import IMPORTED_FROM
from wm.workers import lifecycle

ROOT = "https://tc.example.com"
PROVIDERS = {"legacy-aws": ProviderFacts("aws", adopt_legacy=True, regions=("us-east-1",))}
CREATED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
MODIFIED = datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
EXPIRES = datetime(2030, 12, 8, 10, 0, tzinfo=UTC)


def body(image: str = "ami-1", provider: str = "legacy-aws", **top: object) -> dict:
    return {
        "providerId": provider,
        "description": "linux",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {
            "minCapacity": 0,
            "maxCapacity": 10,
            "launchConfigs": [
                {
                    "region": "us-east-1",
                    "launchConfig": {"ImageId": image, "InstanceType": "m5.large"},
                    "workerManager": {"launchConfigId": f"lc-{image}", "capacityPerInstance": 2},
                }
            ],
        },
        **top,
    }


def legacy_pool(pool_id: str, image: str = "ami-1", **top: object) -> LegacyPool:
    return LegacyPool(pool_id, "legacy-aws", body(image, **top))


def legacy_worker(pool_id: str, worker_id: str, state: str = "running") -> LegacyWorker:
    return LegacyWorker(
        worker_pool_id=pool_id,
        worker_group="us-east-1",
        worker_id=worker_id,
        provider_id="legacy-aws",
        state=state,
        capacity=2,
        launch_config_id="lc-ami-1",
        created=CREATED,
        expires=EXPIRES,
        last_modified=MODIFIED,
    )


def run(engine, pools, workers, *, dry_run: bool = False) -> Imported | ImportRefused:
    return import_fleet(
        engine,
        ROOT,
        pools,
        workers,
        PROVIDERS,
        workers_register={"legacy-aws": True},
        dry_run=dry_run,
    )


def rows(engine):
    return sorted((w.worker_id, w.state) for w in list_workers(engine, limit=None))


def test_pools_and_workers_are_written_together_with_what_the_api_told(engine):
    outcome = run(
        engine,
        [legacy_pool("proj/a")],
        [legacy_worker("proj/a", "i-1"), legacy_worker("proj/a", "i-2", "requested")],
    )
    assert isinstance(outcome, Imported) and outcome.workers_written == 2
    assert [p.pool_id for p in pool_store.load_pools(engine)] == ["proj/a"]
    running = next(w for w in list_workers(engine, limit=None) if w.tc_worker_id == "i-1")
    assert (running.worker_id, running.state, running.capacity) == (
        "proj/a/us-east-1/i-1",
        WorkerState.RUNNING,
        2,
    )
    assert (running.launch_config_id, running.provider_id, running.cloud_id) == (
        "lc-ami-1",
        "legacy-aws",
        None,
    )
    assert (running.created, running.last_modified, running.expires) == (
        CREATED,
        MODIFIED,
        EXPIRES,
    )
    assert running.registered_at == MODIFIED
    assert running.provider_data[IMPORTED_FROM] == ROOT


def test_a_second_import_adds_only_the_new_workers_and_pool_changes(engine):
    run(engine, [legacy_pool("proj/a")], [legacy_worker("proj/a", "i-1")])
    again = run(
        engine,
        [legacy_pool("proj/a", description="renamed"), legacy_pool("proj/b")],
        [legacy_worker("proj/a", "i-1"), legacy_worker("proj/a", "i-3")],
    )
    assert isinstance(again, Imported) and again.workers_written == 1
    verdicts = {s.pool_id: s.verdict for s in again.summaries}
    assert verdicts == {"proj/a": "changed", "proj/b": "new"}
    assert [s.known_workers for s in again.summaries if s.pool_id == "proj/a"] == [{"running": 1}]
    assert rows(engine) == [
        ("proj/a/us-east-1/i-1", WorkerState.RUNNING),
        ("proj/a/us-east-1/i-3", WorkerState.RUNNING),
    ]
    same = run(engine, [legacy_pool("proj/a", description="renamed"), legacy_pool("proj/b")], [])
    assert isinstance(same, Imported) and same.pool_changes == () and same.workers_written == 0
    assert {s.verdict for s in same.summaries} == {"unchanged"}


def test_a_dry_run_writes_nothing(engine):
    outcome = run(engine, [legacy_pool("proj/a")], [legacy_worker("proj/a", "i-1")], dry_run=True)
    assert isinstance(outcome, Imported) and outcome.summaries[0].new_workers == {"running": 1}
    assert (pool_store.load_pools(engine), rows(engine)) == ([], [])


def test_a_bad_definition_refuses_everything(engine):
    bad = LegacyPool("proj/bad", "legacy-aws", {**body(), "owner": "nobody"})
    outcome = run(engine, [legacy_pool("proj/a"), bad], [legacy_worker("proj/a", "i-1")])
    assert isinstance(outcome, ImportRefused)
    assert outcome.problems[0].startswith("pool proj/bad: owner")
    assert (pool_store.load_pools(engine), rows(engine)) == ([], [])


def test_a_launch_config_conflicting_with_wms_refuses_everything(engine):
    # wm holds lc-ami-1 describing another machine: worker-manager's 409, nothing written.
    held = parse_pool_definition("proj/a", body("ami-1"), {"legacy-aws": "aws"})
    apply_change(engine, ApplyDefinitions((held,)))
    moved = body("ami-1")
    moved["config"]["launchConfigs"][0]["launchConfig"]["InstanceType"] = "c5.xlarge"
    outcome = run(
        engine,
        [LegacyPool("proj/a", "legacy-aws", moved), legacy_pool("proj/b")],
        [legacy_worker("proj/a", "i-1")],
    )
    assert isinstance(outcome, ImportRefused)
    assert "launch config with ID `lc-ami-1` already exists" in outcome.problems[0]
    assert [p.pool_id for p in pool_store.load_pools(engine)] == ["proj/a"]
    assert rows(engine) == []


def test_a_worker_whose_launch_config_cannot_be_resolved_refuses_everything(engine):
    lost = LegacyWorker(**{**legacy_worker("proj/a", "i-9").__dict__, "launch_config_id": "lc-x"})
    outcome = run(engine, [legacy_pool("proj/a")], [legacy_worker("proj/a", "i-1"), lost])
    assert isinstance(outcome, ImportRefused)
    assert outcome.problems[0].startswith("worker proj/a/us-east-1/i-9: its launchConfigId")
    assert (pool_store.load_pools(engine), rows(engine)) == ([], [])


def test_pools_of_other_providers_in_wm_are_left_alone(engine):
    mine = parse_pool_definition(
        "proj/mine", body(provider="wm-aws"), {"wm-aws": "aws", "legacy-aws": "aws"}
    )
    apply_change(engine, ApplyDefinitions((mine,)))
    before = pool_store.load_pools(engine)
    outcome = run(engine, [legacy_pool("proj/a")], [])
    assert isinstance(outcome, Imported)
    after = {p.pool_id: p for p in pool_store.load_pools(engine)}
    assert after["proj/mine"] == before[0] and set(after) == {"proj/a", "proj/mine"}


def test_a_worker_registered_long_ago_is_not_overdue_once_imported(engine):
    # Registered (lastModified) years before the import, far past the pool's 2 hours of queue
    # inactivity: wm has seen no claim by it yet, so its clock starts at the import.
    run(engine, [legacy_pool("proj/a")], [legacy_worker("proj/a", "i-1")])
    (row,) = list_workers(engine, limit=None)
    pools = {p.pool_id: p for p in pool_store.load_pools(engine)}
    with engine.connect() as conn:
        now = conn.execute(select(func.now())).scalar_one()
    assert row.registered_at == MODIFIED and row.last_active is not None
    assert lifecycle.overdue([row], pools, now) == []
    later = now + timedelta(seconds=pools["proj/a"].queue_inactivity_timeout_s + 1)
    assert [d.reason for d in lifecycle.overdue([row], pools, later)] == [
        lifecycle.QUEUE_INACTIVITY
    ]
