"""A worker's whole life on each simulated cloud, driven by the simulated agent over HTTP:
launched -> registered (running) -> re-registered -> removes itself -> stopped.

Everything real: Postgres, the provisioner pass, the provider SDKs against the simulated
clouds, the worker API served by uvicorn, the identity verifiers checking proofs the
simulated clouds signed, and the scanner deleting the VM.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import uvicorn

from tests.fixtures.sim_arm import azure_config
from tests.fixtures.sim_ec2 import aws_config
from tests.fixtures.sim_gce import gcp_config
from tests.support.configs import build
from tests.support.definitions import apply_pools
from wm.api.app import create_app
from wm.api.authn import Authenticator, IssuerSource
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider, build_verifier
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner
from wmsim.agent import AgentSettings
from wmsim.fleet import Fleet
from wmsim.postgres import free_port

POOL = "proj/life"
MACHINES = {
    "aws": ("m5.large", "ami-0abcdef1234567890"),
    "gcp": ("e2-small", "projects/debian-cloud/global/images/family/debian-12"),
    "azure": ("Standard_D2s_v5", "Canonical:ubuntu-24_04-lts:server:latest"),
}


@dataclass
class Cloud:
    kind: str
    sim_fixture: str


CLOUDS = [Cloud("aws", "sim_ec2"), Cloud("gcp", "sim_gce"), Cloud("azure", "sim_arm")]


def provider_config(kind: str, sim):
    trust = str(sim.identity_trust_path)
    if kind == "aws":
        return aws_config(sim.endpoint).model_copy(update={"identity_certificate": trust})
    if kind == "gcp":
        return gcp_config(sim.endpoint).model_copy(update={"identity_jwks": trust})
    return azure_config(sim).model_copy(update={"identity_roots": (trust,)})


@pytest.fixture
def api(engine) -> Iterator[tuple[str, dict]]:
    """The worker API on a real port; the verifiers are filled in by the test."""
    verifiers: dict = {}
    port = free_port()
    public_url = f"http://127.0.0.1:{port}"
    issuer = IssuerSource(engine)
    app = create_app(
        engine,
        verifiers,
        provider_kinds={"aws-test": "aws", "gcp-test": "gcp", "azure-test": "azure"},
        deployment_id="test-deploy",
        root_url=public_url,
        authenticator=Authenticator(issuer, operator_token=None, auth_service=None),
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
    yield public_url, verifiers
    server.should_exit = True
    thread.join(timeout=10)


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("cloud", CLOUDS, ids=[c.kind for c in CLOUDS])
def test_a_worker_lives_its_whole_life_through_the_api(request, engine, api, cloud):
    sim = request.getfixturevalue(cloud.sim_fixture)
    public_url, verifiers = api
    provider_cfg = provider_config(cloud.kind, sim)
    machine, image = MACHINES[cloud.kind]
    region = provider_cfg.regions[0]
    raw = {
        "deployment_id": "test-deploy",
        "root_url": public_url,
        "providers": [provider_cfg.model_dump(mode="json", exclude_none=True)],
        "pools": [
            {
                "id": POOL,
                "provider": provider_cfg.id,
                "max_capacity": 1,
                # Re-registration within the test, at half the secret's life, with room to spare
                # on a loaded machine before the secret expires.
                "reregistration_timeout_s": 4.0,
                "launch_configs": [
                    {
                        "region": region,
                        "machine_type": machine,
                        "image": image,
                        # worker-runner on GCE will not start without an external IP to read
                        "public_ip": cloud.kind == "gcp",
                    }
                ],
            }
        ],
    }
    config = build(raw)
    apply_pools(engine, config, raw["pools"])
    verifiers[provider_cfg.id] = build_verifier(provider_cfg, "test-deploy", public_url)
    provider = build_provider(provider_cfg, "test-deploy", root_url=public_url)
    try:
        tasks.submit_tasks(engine, POOL, 2, 0.2)
        Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
        (launched,) = list_workers(engine, pool_id=POOL)
        assert launched.state == WorkerState.REQUESTED and launched.cloud_id

        running = {vm.cloud_id for vm in sim.instances() if vm.state == "running"}
        fleet = Fleet(
            config,
            engine,
            settings=AgentSettings(idle_timeout_s=4.5, should_terminate_every_s=0.5),
            running_vms=lambda: {provider.id: running},
        )
        assert fleet.sync() == 1
        agent = fleet.agents[launched.worker_id]
        wait_until(lambda: list_workers(engine)[0].state == WorkerState.RUNNING, 15, "registered")
        wait_until(lambda: "reregistered" in agent.events, 15, "re-registered")
        wait_until(lambda: list_workers(engine)[0].state == WorkerState.STOPPING, 20, "removal")
        # The row changes before the agent has read the answer and noted it.
        wait_until(lambda: agent.events[-1].startswith("remove"), 5, "the agent noting it")
        assert agent.events.count("task-done") == 2
        assert agent.events[0] == "registered" and agent.events[-1] == "removed"

        scanner = Scanner(engine, {provider.id: provider}, missing_grace_s=0, orphan_grace_s=0)
        wait_until(
            lambda: (
                scanner.scan(provider.id, region) is not None
                and list_workers(engine)[0].state == WorkerState.STOPPED
            ),
            20,
            "stopped",
        )
        (done,) = list_workers(engine)
        assert done.stop_reason == "removed-by-worker"
        assert [vm for vm in sim.instances() if vm.state not in ("gone", "stopped")] == []
    finally:
        fleet_stop = locals().get("fleet")
        if fleet_stop:
            fleet_stop.halt()
        provider.close()
