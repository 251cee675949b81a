"""A legacy worker-manager deployment runs on the three simulated clouds: its provisioner
launches VMs through the launchers that make them as worker-manager does, the simulated
worker-runner on each registers at the stand-in with its VM's proof, runs builtin-queue tasks
and removes itself when idle; removeWorker deletes the VM and what was made for it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import taskcluster

from tests.support.fake_tc_deployment import FakeTaskcluster
from tests.support.legacy_deployment import ISSUER, LEGACY_PROVIDERS, legacy_pools, legacy_providers
from tests.support.tc_client import refused
from tests.support.tc_schemas import check
from wm.db import tasks as task_store
from wm.take_over.marks import imported_worker_id
from wmsim.agent import AgentSettings
from wmsim.clouds import sim_cloud
from wmsim.legacy.stack import LegacyStack

FAST = AgentSettings(
    idle_timeout_s=1.5, should_terminate_every_s=0.3, notice_every_s=0.3, poll_s=0.05
)
ADMIN = ("admin", "admin-token-" + "y" * 32)
WAIT_S = 45


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        time.sleep(0.1)


def test_the_legacy_fleet_runs_tasks_on_all_three_clouds_and_leaves_nothing(
    engine, sim_ec2, sim_gce, sim_arm
):
    providers = legacy_providers(sim_ec2, sim_gce, sim_arm)
    pools = [pool_id for _, _, _, pool_id, _ in LEGACY_PROVIDERS]
    for pool_id in pools:
        task_store.submit_tasks(engine, pool_id, 3, 0.2)

    with LegacyStack.start(
        engine=engine,
        providers=providers,
        issuer_client_id=ISSUER[0],
        issuer_access_token=ISSUER[1],
        pools=legacy_pools(max_capacity=2),
        agent_settings=FAST,
    ) as legacy:
        wait_for(
            lambda: all(
                len(task_store.list_tasks(engine, pool_id=p, state="completed")) == 3 for p in pools
            ),
            "every task completed",
        )
        done = task_store.list_tasks(engine, state="completed")
        workers = legacy.manager.workers()
        wait_for(
            lambda: all(w.state == "stopped" for w in legacy.manager.workers()),
            "every worker removed itself and its VM is gone",
        )
        calls = list(legacy.manager.deployment.calls)

    names = {imported_worker_id(*w.key) for w in workers}
    assert {t.claimed_by for t in done} <= names
    assert {w.provider_id for w in workers} == {"aws", "fxci-level1-gcp", "azure2"}
    assert ("registerWorker", None) in calls
    removers = {client for name, client in calls if name == "removeWorker"}
    assert removers and all(c and c.startswith("worker/") for c in removers)
    assert [vm for vm in sim_ec2.instances() if vm.state in ("pending", "running")] == []
    assert [vm for vm in sim_gce.instances() if vm.state in ("provisioning", "running")] == []
    assert sim_arm.resources() == []


def test_remove_worker_deletes_the_vm_and_a_removed_provider_is_left_alone(
    engine, sim_ec2, sim_gce, sim_arm
):
    providers = legacy_providers(sim_ec2, sim_gce, sim_arm)
    aws_pool, gcp_pool, azure_pool = (pool_id for _, _, _, pool_id, _ in LEGACY_PROVIDERS)
    for pool_id in (aws_pool, gcp_pool, azure_pool):
        task_store.submit_tasks(engine, pool_id, 1, 30.0)  # long: the workers stay busy
    with LegacyStack.start(
        engine=engine,
        providers=providers,
        issuer_client_id=ISSUER[0],
        issuer_access_token=ISSUER[1],
        pools=legacy_pools(max_capacity=1),
        agent_settings=FAST,
        clients={},
    ) as legacy:
        legacy.manager.add_client(*ADMIN, ["*"])
        admin = taskcluster.WorkerManager(
            {
                "rootUrl": legacy.manager.base_url,
                "credentials": {"clientId": ADMIN[0], "accessToken": ADMIN[1]},
            }
        )
        wait_for(lambda: len(legacy.manager.workers(state="running")) == 3, "three workers running")
        (azure_worker,) = [w for w in legacy.manager.workers() if w.provider_id == "azure2"]
        (aws_worker,) = [w for w in legacy.manager.workers() if w.provider_id == "aws"]

        admin.removeWorker(*azure_worker.key)
        wait_for(lambda: azure_worker.state == "stopped", "the Azure worker stopped")
        wait_for(lambda: sim_arm.resources() == [], "every Azure resource of the worker deleted")

        legacy.manager.remove_provider("aws")
        expires = datetime.now(UTC) + timedelta(days=1)
        with legacy.manager.store.lock:
            aws_worker.expires = expires  # due for worker-scanner.js's extension
        task_store.submit_tasks(engine, aws_pool, 2, 0.1)
        wait_for(
            lambda: any("unknown providerId aws" in w for w in legacy.provisioner.warnings),
            "the provisioner skipped the aws pool",
        )
        wait_for(
            lambda: aws_worker.expires > expires + timedelta(days=6),
            "the scanner extended the aws worker's expiry to 8 days",
        )
        launched, loops = legacy.provisioner.launched, legacy.provisioner.loops
        wait_for(lambda: legacy.provisioner.loops >= loops + 3, "three more loops")
        aws_workers = [w for w in legacy.manager.workers() if w.provider_id == "aws"]
        providers_listed = [p["providerId"] for p in admin.listProviders()["providers"]]

    assert legacy.provisioner.launched == launched
    assert aws_workers == [aws_worker] and aws_worker.state == "running"
    assert [vm.state for vm in sim_ec2.instances()] == ["running"]  # its VM is left running
    assert providers_listed == ["fxci-level1-gcp", "azure2"]


def test_workers_reach_the_stand_in_through_the_root_url_ingress_and_renew_there(
    engine, sim_ec2, sim_gce, sim_arm
):
    providers = legacy_providers(sim_ec2, sim_gce, sim_arm)
    pools = [pool_id for _, _, _, pool_id, _ in LEGACY_PROVIDERS]
    for pool_id in pools:
        task_store.submit_tasks(engine, pool_id, 2, 2.0)  # 4 s of work: past a 3 s lifetime
    with FakeTaskcluster({}) as ingress:
        legacy = LegacyStack.create(
            engine=engine,
            providers=providers,
            issuer_client_id=ISSUER[0],
            issuer_access_token=ISSUER[1],
            root_url=ingress.root_url,
            pools=legacy_pools(max_capacity=1, reregistrationTimeout=3),
            agent_settings=FAST,
        )
        ingress.upstream = legacy.manager.base_url
        with legacy.run():
            wait_for(
                lambda: len(task_store.list_tasks(engine, state="completed")) == 6,
                "every task completed",
            )
            calls = list(legacy.manager.deployment.calls)
            agents = list(legacy.fleet.agents.values())
        routed = list(ingress.routed)

    renewals = [client for name, client in calls if name == "reregisterWorker"]
    assert len(renewals) >= 3 and all(c.startswith("worker/") for c in renewals)
    assert all("reregistered" in agent.events for agent in agents)
    assert any("/worker/register" in r for r in routed)
    assert any("/worker/reregister" in r for r in routed)


def test_a_vm_that_never_registers_is_removed_at_its_registration_timeout(
    engine, sim_ec2, sim_gce, sim_arm
):
    providers = legacy_providers(sim_ec2, sim_gce, sim_arm)
    for _, _, _, pool_id, _ in LEGACY_PROVIDERS:
        task_store.submit_tasks(engine, pool_id, 1, 1.0)
    legacy = LegacyStack.create(
        engine=engine,
        providers=providers,
        issuer_client_id=ISSUER[0],
        issuer_access_token=ISSUER[1],
        pools=legacy_pools(max_capacity=1, registrationTimeout=1),
    )
    legacy.provisioner.start()  # no fleet: nothing boots on the VMs
    try:
        wait_for(lambda: legacy.provisioner.launched >= 3, "a VM launched in every pool")
        first = {w.key: w for w in legacy.manager.workers()}
        wait_for(
            lambda: all(w.state == "stopped" for w in first.values()),
            "every unregistered worker removed and its VM gone",
        )
    finally:
        legacy.stop()

    assert len(first) >= 3
    gone = {vm.cloud_id for vm in sim_ec2.instances() if vm.state not in ("pending", "running")}
    assert {k[2] for k in first if k[0].endswith("aws")} <= gone
    assert not any(vm_name in r for r in sim_arm.resources() for vm_name in (k[2] for k in first))


def test_registration_takes_only_the_proof_of_the_workers_own_vm(engine, sim_ec2, sim_gce, sim_arm):
    providers = legacy_providers(sim_ec2, sim_gce, sim_arm)
    for _, _, _, pool_id, _ in LEGACY_PROVIDERS:
        task_store.submit_tasks(engine, pool_id, 2, 1.0)
    legacy = LegacyStack.create(
        engine=engine,
        providers=providers,
        issuer_client_id=ISSUER[0],
        issuer_access_token=ISSUER[1],
        pools=legacy_pools(max_capacity=2),
    )
    legacy.manager.add_client(*ADMIN, ["*"])
    legacy.provisioner.start()  # no fleet: the test registers in the workers' place
    try:
        wait_for(lambda: legacy.provisioner.launched >= 6, "two VMs launched in every pool")
        legacy.provisioner.stop()
        anonymous = taskcluster.WorkerManager({"rootUrl": legacy.manager.base_url})
        admin = taskcluster.WorkerManager(
            {
                "rootUrl": legacy.manager.base_url,
                "credentials": {"clientId": ADMIN[0], "accessToken": ADMIN[1]},
            }
        )
        for provider in providers:
            mine, other = [
                w for w in legacy.manager.workers() if w.provider_id == provider.provider_id
            ]
            proof_of = {
                w.worker_id: sim_cloud(provider.kind)
                .metadata_reader(provider.metadata_url(w.worker_id), provider.ca_bundle)
                .identity_proof(legacy.manager.root_url)
                for w in (mine, other)
            }
            body = {
                "workerPoolId": mine.worker_pool_id,
                "providerId": provider.provider_id,
                "workerGroup": mine.worker_group,
                "workerId": mine.worker_id,
            }

            assert refused(
                lambda body=body, p=proof_of[other.worker_id]: anonymous.registerWorker(
                    {**body, "workerIdentityProof": p}
                )
            ) == (400, "InputError"), provider.provider_id
            answer = anonymous.registerWorker(
                {**body, "workerIdentityProof": proof_of[mine.worker_id]}
            )
            check("register-worker-response", answer)
            listed = admin.listWorkersForWorkerPool(mine.worker_pool_id)
            assert sorted(w["state"] for w in check("worker-list", listed)["workers"]) == [
                "requested",
                "running",
            ]
            for worker in listed["workers"]:
                check("worker-full", worker)
    finally:
        legacy.stop()
