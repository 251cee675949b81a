"""The simulated worker's whole life, as worker-runner lives it: boot data and identity proof
from its VM's metadata on the simulated EC2 (and its start on GCE and Azure), then the
worker-manager API through the real taskcluster client (a stand-in server answers, checking
Hawk), builtin-queue tasks in Postgres."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import boto3
import jwt
import pytest
from sqlalchemy import Engine

from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import GCE_ZONE
from tests.support.fake_worker_manager import FakeWorkerManager
from tests.support.sim_vms import SERVICE_ACCOUNT, azure_vm, gce_insert
from wm.db import tasks as task_store
from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentSettings, WorkerAgent, run_in_thread
from wmsim.aws.bootdata import Ec2Metadata
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.azure.bootdata import AzureMetadata
from wmsim.control import metadata_base_url
from wmsim.gcp.bootdata import GceMetadata
from wmsim.gcp.gce import SimGce
from wmsim.gcp.identity import service_account_id

POOL = "proj/ci"
INTENT = "w-intent-1"  # the name the builtin queue knows the worker by
FAST = AgentSettings(
    idle_timeout_s=2.0, should_terminate_every_s=0.3, notice_every_s=0.3, poll_s=0.05
)


@pytest.fixture
def fake_wm() -> Iterator[FakeWorkerManager]:
    fake = FakeWorkerManager().start()
    yield fake
    fake.stop()


def boot_vm(sim: SimEc2, root_url: str, *, spot: bool = False) -> tuple[str, Ec2Metadata]:
    """One instance launched with worker-manager's user data; its id and metadata service."""
    sim.faults.behaviour.update(boot_s=0)
    client = boto3.client(
        "ec2",
        endpoint_url=sim.endpoint,
        region_name=EC2_REGION,
        aws_access_key_id="sim",
        aws_secret_access_key="sim",
    )
    user_data = {
        "rootUrl": root_url,
        "workerPoolId": POOL,
        "providerId": "aws-main",
        "workerGroup": EC2_REGION,
        "launchConfigId": "lc-1",
        "workerConfig": {},
    }
    extra = {"InstanceMarketOptions": {"MarketType": "spot"}} if spot else {}
    reply = client.run_instances(
        ImageId="ami-0abcdef1234567890",
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        UserData=json.dumps(user_data),
        **extra,
    )
    instance_id = reply["Instances"][0]["InstanceId"]
    return instance_id, Ec2Metadata(metadata_base_url("aws", sim.endpoint, instance_id))


def agent_for(metadata: Ec2Metadata, engine: Engine, settings: AgentSettings = FAST) -> WorkerAgent:
    return WorkerAgent(metadata, BuiltinQueue(engine), INTENT, capacity=1, settings=settings)


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def finish(thread: threading.Thread, timeout_s: float = 20) -> None:
    thread.join(timeout_s)
    assert not thread.is_alive(), "the agent did not finish"


def test_a_worker_registers_renews_works_and_leaves_through_the_taskcluster_client(
    sim_ec2: SimEc2, engine: Engine, fake_wm: FakeWorkerManager
):
    # Scenario: a booted instance, two short tasks waiting, credentials that live 3 s.
    instance_id, metadata = boot_vm(sim_ec2, fake_wm.root_url)
    task_store.submit_tasks(engine, POOL, 2, 0.2)
    agent = agent_for(metadata, engine)

    # Action: the worker lives its life.
    finish(run_in_thread(agent))

    # Outcome: registered with what the metadata said, renewed, worked, asked, left.
    assert agent.events[0] == "registered" and agent.events[-2:] == ["idle", "removed"]
    assert agent.events.count("task-done") == 2 and "reregistered" in agent.events
    names = fake_wm.names()
    assert names[0] == "registerWorker" and names[-1] == "removeWorker"
    assert "reregisterWorker" in names and "shouldWorkerTerminate" in names
    register = fake_wm.calls[0]
    assert register.client_id is None  # registerWorker is sent without credentials
    proof = sim_ec2.identity_proof(instance_id)
    assert register.body["workerIdentityProof"] == {
        "document": proof["document"],
        "signature": proof["signature"],
    }
    assert (register.body["workerId"], register.body["workerGroup"]) == (instance_id, EC2_REGION)
    assert (register.body["workerPoolId"], register.body["providerId"]) == (POOL, "aws-main")
    assert datetime.fromisoformat(register.body["systemBootTime"].replace("Z", "+00:00"))
    # Every later call was Hawk-signed with credentials the API issued, the renewed ones after
    # the renewal; path parameters arrived as the worker's cloud identity.
    later = fake_wm.calls[1:]
    assert all(c.client_id in fake_wm.tokens for c in later)
    renewal = names.index("reregisterWorker")
    assert later[renewal - 1].client_id != fake_wm.calls[-1].client_id
    assert fake_wm.calls[-1].params == (POOL, EC2_REGION, instance_id)
    done = task_store.count_by_state(engine)
    assert done.get((POOL, "completed")) == 2


def test_a_task_whose_claim_was_lost_is_reported_with_report_worker_error(
    sim_ec2: SimEc2, engine: Engine, fake_wm: FakeWorkerManager
):
    _, metadata = boot_vm(sim_ec2, fake_wm.root_url)
    fake_wm.lifetime_s = 60
    (task_id,) = task_store.submit_tasks(engine, POOL, 1, 1.0)
    agent = agent_for(metadata, engine)
    thread = run_in_thread(agent)
    wait_until(lambda: task_store.count_by_state(engine).get((POOL, "claimed")), 10, "claim")

    # Action: the queue takes the task back while the worker runs it.
    BuiltinQueue(engine).release([INTENT])

    finish(thread)
    assert "error-reported:claim-lost" in agent.events
    (report,) = [c for c in fake_wm.calls if c.name == "reportWorkerError"]
    assert report.params == (POOL,)
    assert report.body["kind"] == "claim-lost" and report.body["extra"] == {"taskId": str(task_id)}
    assert report.body["workerId"] == fake_wm.calls[0].body["workerId"]


def test_a_shed_registration_is_repeated_and_a_refused_one_is_not(
    sim_ec2: SimEc2, engine: Engine, fake_wm: FakeWorkerManager
):
    _, metadata = boot_vm(sim_ec2, fake_wm.root_url)
    fake_wm.register_statuses = [503]
    shed = agent_for(metadata, engine)
    assert shed.register()
    assert shed.retries == 1 and shed.answers[503] == 1 and shed.answers[200] == 1

    fake_wm.refuse_register = (400, "InputError")
    refused = agent_for(metadata, engine)
    assert not refused.register()
    assert refused.events == ["register-refused:InputError"] and refused.retries == 0


def test_a_worker_told_to_terminate_leaves(
    sim_ec2: SimEc2, engine: Engine, fake_wm: FakeWorkerManager
):
    _, metadata = boot_vm(sim_ec2, fake_wm.root_url)
    fake_wm.lifetime_s = 60
    fake_wm.terminate = True
    agent = agent_for(metadata, engine, AgentSettings(should_terminate_every_s=0.1, poll_s=0.05))

    finish(run_in_thread(agent))

    assert agent.events == ["registered", "told-to-terminate:launch config archived", "removed"]


def test_a_vm_already_announced_for_pre_emption_does_not_start_a_worker(
    sim_ec2: SimEc2, engine: Engine, fake_wm: FakeWorkerManager
):
    sim_ec2.faults.behaviour.update(preempt_share=1.0, preempt_within_s=110)
    _, metadata = boot_vm(sim_ec2, fake_wm.root_url, spot=True)
    agent = agent_for(metadata, engine)

    finish(run_in_thread(agent))

    assert agent.events == ["terminating-at-boot"] and fake_wm.calls == []


def test_on_gce_the_worker_is_its_numeric_id_and_proves_it_with_a_token_for_the_root_url(
    sim_gce: SimGce, engine: Engine, fake_wm: FakeWorkerManager
):
    boot = {"workerPoolId": POOL, "providerId": "gcp-main", "workerGroup": GCE_ZONE}
    vm_id = gce_insert(sim_gce, "worker-g", {**boot, "rootUrl": fake_wm.root_url})
    metadata = GceMetadata(metadata_base_url("gcp", sim_gce.endpoint, vm_id))
    agent = WorkerAgent(metadata, BuiltinQueue(engine), INTENT, settings=FAST)

    assert agent.register()

    body = fake_wm.calls[0].body
    assert {k: body[k] for k in boot} == boot and body["workerId"] == vm_id
    claims = jwt.decode(body["workerIdentityProof"]["token"], options={"verify_signature": False})
    assert claims["aud"] == fake_wm.root_url
    assert claims["sub"] == service_account_id(SERVICE_ACCOUNT)
    assert claims["google"]["compute_engine"]["instance_id"] == vm_id


def test_on_azure_the_worker_reads_its_tags_and_proves_itself_with_the_attested_document(
    sim_arm: SimArm, engine: Engine, fake_wm: FakeWorkerManager
):
    tags = {
        "worker-pool-id": POOL,
        "provider-id": "azure-main",
        "worker-group": "eastus",
        "root-url": fake_wm.root_url,
    }
    rid = azure_vm(sim_arm, "vm-worker-a", tags)
    base = metadata_base_url("azure", sim_arm.endpoint, rid)
    metadata = AzureMetadata(base, str(sim_arm.cert_path))
    agent = WorkerAgent(metadata, BuiltinQueue(engine), INTENT, settings=FAST)

    assert agent.register()

    body = fake_wm.calls[0].body
    assert (body["workerPoolId"], body["providerId"]) == (POOL, "azure-main")
    assert (body["workerGroup"], body["workerId"]) == ("eastus", "vm-worker-a")
    assert set(body["workerIdentityProof"]) == {"document"}  # no nonce: worker-runner sends none


def test_on_azure_a_vm_without_worker_manager_tags_does_not_start(
    sim_arm: SimArm, engine: Engine, fake_wm: FakeWorkerManager
):
    rid = azure_vm(sim_arm, "vm-untagged", {"wm-deployment": "test-deploy"})
    metadata = AzureMetadata(
        metadata_base_url("azure", sim_arm.endpoint, rid), str(sim_arm.cert_path)
    )
    agent = WorkerAgent(metadata, BuiltinQueue(engine), INTENT, settings=FAST)

    assert not agent.register()
    assert agent.events == ["metadata-unavailable:/metadata/instance"] and fake_wm.calls == []
