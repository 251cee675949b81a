"""A static pool's machine and a cloud pool's VM work side by side in one deployment: each
runs its own pool's builtin-queue tasks, registered through the same worker API.

Everything real: Postgres, the provisioner pass launching on the simulated EC2 (which it does
for the cloud pool alone), the worker API served by uvicorn with the EC2 identity verifier and
the static secret verifier, createWorker by the operator through the real `taskcluster`
client, and the simulated worker-runner: its EC2 path on the VM, its static path on the rack
machine (wmsim.hand_made, through the demo's Rack).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn

from tests.fixtures.sim_ec2 import aws_config
from tests.support.configs import build
from tests.support.definitions import apply_pools
from wm.api.app import create_app
from wm.api.authn import OPERATOR_CLIENT, Authenticator, IssuerSource
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider, build_verifier
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentSettings
from wmsim.demo.rack import Rack, StaticPool
from wmsim.fleet import Fleet
from wmsim.postgres import free_port

CLOUD_POOL = "proj/cloud"
STATIC_POOL = "proj/rack"
STATIC_PROVIDER = "static-rack"
OPERATOR_TOKEN = "operator-token-for-the-side-by-side-test"
FAST = AgentSettings(idle_timeout_s=60, should_terminate_every_s=0.3, poll_s=0.05)


@pytest.fixture
def api(engine) -> Iterator[tuple[str, dict]]:
    """The worker API on a real port, knowing an EC2 provider and a static one; the verifiers
    are filled in by the test."""
    verifiers: dict = {}
    port = free_port()
    root_url = f"http://127.0.0.1:{port}"
    issuer = IssuerSource(engine)
    app = create_app(
        engine,
        verifiers,
        provider_kinds={"aws-test": "aws", STATIC_PROVIDER: "static"},
        deployment_id="test-deploy",
        root_url=root_url,
        authenticator=Authenticator(issuer, operator_token=OPERATOR_TOKEN, auth_service=None),
        issuer=issuer,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield root_url, verifiers
    server.should_exit = True
    thread.join(timeout=10)


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def states(engine, pool_id: str) -> set[str]:
    return {t.state for t in tasks.list_tasks(engine, limit=None) if t.pool_id == pool_id}


def test_a_static_machine_runs_its_pools_tasks_beside_a_cloud_vm(
    engine, api, sim_ec2, tmp_path: Path
):
    # Scenario: one deployment, an EC2 provider and a static one; tasks waiting in both pools.
    root_url, verifiers = api
    cloud = aws_config(sim_ec2.endpoint).model_copy(
        update={"identity_certificate": str(sim_ec2.identity_trust_path)}
    )
    raw = {
        "deployment_id": "test-deploy",
        "root_url": root_url,
        "providers": [
            cloud.model_dump(mode="json", exclude_none=True),
            {"id": STATIC_PROVIDER, "kind": "static"},
        ],
        "pools": [
            {
                "id": CLOUD_POOL,
                "provider": cloud.id,
                "max_capacity": 1,
                "launch_configs": [
                    {
                        "region": cloud.regions[0],
                        "machine_type": "m5.large",
                        "image": "ami-0abcdef1234567890",
                    }
                ],
            }
        ],
    }
    config = build(raw)
    apply_pools(engine, config, raw["pools"])
    for provider_config in config.providers:
        verifiers[provider_config.id] = build_verifier(provider_config, "test-deploy", root_url)
    operator = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
    rack = Rack(root_url=root_url, operator=operator, out_dir=tmp_path, settings=FAST)
    rack._client().createWorkerPool(
        STATIC_POOL,
        {
            "providerId": STATIC_PROVIDER,
            "description": "a rack",
            "config": {"workerConfig": {}},
            "owner": "hw@example.com",
            "emailOnError": False,
        },
    )
    tasks.submit_tasks(engine, CLOUD_POOL, 2, 0.2)
    tasks.submit_tasks(engine, STATIC_POOL, 4, 0.2)
    provider = build_provider(cloud, "test-deploy", root_url=root_url)
    fleet = None

    # Action: the provisioner launches for the cloud pool; the VM's worker and the rack
    # machine's (made with createWorker) register and work.
    try:
        Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
        (vm,) = list_workers(engine, pool_id=CLOUD_POOL)
        running = {i.cloud_id for i in sim_ec2.instances() if i.state == "running"}
        fleet = Fleet(config, engine, settings=FAST, running_vms=lambda: {provider.id: running})
        assert fleet.sync() == 1
        (machine,) = rack.join(
            engine, StaticPool(STATIC_POOL, STATIC_PROVIDER, machines=1, capacity=2)
        )
        wait_until(
            lambda: states(engine, CLOUD_POOL) == states(engine, STATIC_POOL) == {"completed"},
            30,
            "every task of both pools done",
        )
    finally:
        rack.halt()
        if fleet is not None:
            fleet.halt()
        provider.close()

    # Outcome: each pool's tasks were run by its own worker, both running by registration;
    # nothing was launched for the static pool.
    rows = {w.pool_id: w for w in list_workers(engine, limit=None)}
    assert set(rows) == {CLOUD_POOL, STATIC_POOL}
    assert rows[STATIC_POOL].provider_id == STATIC_PROVIDER
    assert rows[STATIC_POOL].tc_worker_id == machine.worker_id
    assert rows[CLOUD_POOL].worker_id == vm.worker_id
    for row in rows.values():
        assert row.registered_at is not None and row.state == WorkerState.RUNNING
    by_pool: dict[str, set[str | None]] = {}
    for task in tasks.list_tasks(engine, limit=None):
        by_pool.setdefault(task.pool_id, set()).add(task.claimed_by)
    assert by_pool == {
        CLOUD_POOL: {rows[CLOUD_POOL].worker_id},
        STATIC_POOL: {rows[STATIC_POOL].worker_id},
    }
    assert {i.cloud_id for i in sim_ec2.instances()} == {vm.cloud_id}
