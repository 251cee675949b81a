"""Providers named as real deployments name them (Firefox CI's `azure_trusted`, ids with capitals
and `_`), two of each cloud sharing one account and region, launch, are scanned and register.

Each pair's ids would merge under a naive encoding (worker-manager's GCE `created-by` label makes
`[^a-zA-Z0-9-]` a `-`, and GCE takes lower case only): each provider must still find its own VM
and never take its sibling's for an orphan, though the scans terminate orphans at once. Pools
are created through the API with the real `taskcluster` client holding the provider's scope,
and workers register as worker-runner does (boot data and proof read from the VM's metadata):
their credentials name the provider id as it is.

Everything real: Postgres, the provisioner pass, the providers' SDKs against the simulated
clouds, the worker API served by uvicorn, the identity verifiers, the scanner.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import taskcluster
import uvicorn

from tests.fixtures.sim_arm import azure_config
from tests.fixtures.sim_ec2 import aws_config
from tests.fixtures.sim_gce import gcp_config
from tests.support.configs import build
from tests.support.definitions import documents
from tests.support.tc_client import refused
from wm.api.app import create_app
from wm.api.authn import OPERATOR_CLIENT, Authenticator, IssuerSource
from wm.config.loader import Config, ProviderConfig
from wm.config.provider_ids import gce_label
from wm.db import pools as pool_store
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerRecord, WorkerState
from wm.providers import build_provider, build_verifier
from wm.providers.base import TAG_PROVIDER, Provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner
from wmsim.bootdata import BootData, MetadataError
from wmsim.fleet import vm_metadata, vm_provider
from wmsim.postgres import free_port

DEPLOYMENT = "test-deploy"
OPERATOR_TOKEN = "operator-token-for-provider-id-tests"
# Pairs on one account and region whose ids a naive encoding would merge.
PAIRS = {
    "aws": ("Aws_Trusted", "aws-trusted"),
    "gcp": ("Fxci_Level3-GCP", "fxci-level3-gcp"),
    "azure": ("azure_trusted", "azure-trusted"),
}
SIMS = {"aws": "sim_ec2", "gcp": "sim_gce", "azure": "sim_arm"}
MACHINES = {
    "aws": ("m5.large", "ami-0abcdef1234567890"),
    "gcp": ("e2-small", "projects/debian-cloud/global/images/family/debian-12"),
    "azure": ("Standard_D2s_v5", "Canonical:ubuntu-24_04-lts:server:latest"),
}
WAIT_S = 30.0


def provider_config(kind: str, sim: Any, provider_id: str) -> ProviderConfig:
    trust = str(sim.identity_trust_path)
    if kind == "aws":
        base = aws_config(sim.endpoint, provider_id)
        changes: dict[str, Any] = {"identity_certificate": trust}
    elif kind == "gcp":
        base = gcp_config(sim.endpoint, provider_id)
        changes = {"identity_jwks": trust}
    else:
        base = azure_config(sim, id=provider_id)
        changes = {"identity_roots": (trust,)}
    # One scan unit each, the same for both of a pair.
    return base.model_copy(update={**changes, "regions": base.regions[:1]})


def pool_id(provider_id: str) -> str:
    return f"{provider_id}/workers"  # Taskcluster's pool ids take the provider id's characters


def wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def root_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def config(request, root_url) -> Config:
    providers = [
        provider_config(kind, request.getfixturevalue(SIMS[kind]), provider_id)
        for kind, pair in PAIRS.items()
        for provider_id in pair
    ]
    raw = {
        "deployment_id": DEPLOYMENT,
        "root_url": root_url,
        "providers": [p.model_dump(mode="json", exclude_none=True) for p in providers],
    }
    return build(raw)


@pytest.fixture
def api(engine, config: Config, root_url: str) -> Iterator[str]:
    """The worker API on the root URL's port, with every provider's real verifier."""
    issuer = IssuerSource(engine)
    app = create_app(
        engine,
        {p.id: build_verifier(p, DEPLOYMENT, root_url) for p in config.providers},
        provider_kinds=config.provider_kinds(),
        deployment_id=DEPLOYMENT,
        root_url=root_url,
        authenticator=Authenticator(issuer, operator_token=OPERATOR_TOKEN, auth_service=None),
        issuer=issuer,
    )
    port = int(root_url.rsplit(":", 1)[1])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, "the API to start")
    yield root_url
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def providers(config: Config, root_url: str) -> Iterator[dict[str, Provider]]:
    built = {p.id: build_provider(p, DEPLOYMENT, root_url=root_url) for p in config.providers}
    yield built
    for provider in built.values():
        provider.close()


def operator(root_url: str, scopes: list[str]) -> Any:
    """The real client, as an operator whose request may use only `scopes`."""
    return taskcluster.WorkerManager(
        {
            "rootUrl": root_url,
            "maxRetries": 0,
            "credentials": {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN},
            "authorizedScopes": scopes,
        }
    )


def definition(config: Config, provider: ProviderConfig) -> dict[str, Any]:
    machine, image = MACHINES[provider.kind]
    old = {
        "id": pool_id(provider.id),
        "provider": provider.id,
        "max_capacity": 1,
        # worker-runner on GCE will not start without an external IP to read
        "launch_configs": [
            {
                "region": provider.regions[0],
                "machine_type": machine,
                "image": image,
                "public_ip": provider.kind == "gcp",
            }
        ],
    }
    (document,) = documents(config, [old])
    return {k: v for k, v in document.items() if k != "workerPoolId"}


def boot_data(config: Config, worker: WorkerRecord) -> BootData:
    """What worker-runner reads on the VM: boot data and identity proof from its metadata."""
    metadata = vm_metadata(config.provider(worker.provider_id), worker.cloud_id or "")

    def configured() -> BootData | None:
        try:
            return metadata.configure()
        except MetadataError:
            return None  # not booted yet

    return wait_for(configured, f"{worker.worker_id}'s metadata")


def test_providers_named_as_taskcluster_allows_launch_scan_and_register_apart(
    request, engine, config: Config, api: str, providers: dict[str, Provider]
):
    # Pools created through the API: the provider's scope names its id as it is.
    for provider in config.providers:
        pool = pool_id(provider.id)
        manage = f"worker-manager:manage-worker-pool:{pool}"
        body = definition(config, provider)
        sibling = next(p for p in PAIRS[provider.kind] if p != provider.id)
        wrong = operator(api, [manage, f"worker-manager:provider:{sibling}"])
        status, code = refused(lambda w=wrong, p=pool, b=body: w.createWorkerPool(p, b))
        assert (status, code) == (403, "InsufficientScopes")
        right = operator(api, [manage, f"worker-manager:provider:{provider.id}"])
        assert right.createWorkerPool(pool, body)["providerId"] == provider.id
    pool_store.ensure_scan_units(
        engine, [(p.id, region) for p in config.providers for region in p.regions]
    )

    # One worker per provider, through the provisioner.
    provisioner = Provisioner(engine, BuiltinQueue(engine), providers)
    for provider in config.providers:
        tasks.submit_tasks(engine, pool_id(provider.id), 1, 60.0)
        provisioner.run_pass(provider.id)
    workers = {w.provider_id: w for w in list_workers(engine)}
    assert set(workers) == {p.id for p in config.providers}
    assert all(w.pool_id == pool_id(w.provider_id) and w.cloud_id for w in workers.values())

    # Each provider lists its own VM, and only it, though its sibling's shares the account.
    for provider in config.providers:
        listed = providers[provider.id].list_instances(provider.regions[0])
        assert [i.worker_id for i in listed] == [workers[provider.id].worker_id]
        assert listed[0].pool_id == pool_id(provider.id)

    # On GCE the naive label is one for both; wm's label is each provider's own.
    gce = request.getfixturevalue("sim_gce")
    labels = {vm.tags.get(TAG_PROVIDER): vm.tags for vm in gce.instances()}
    assert set(labels) == {gce_label(p) for p in PAIRS["gcp"]}
    assert len({tags["created-by"] for tags in labels.values()}) == 1

    # The simulator reads each VM's provider back from its tags, as the demo's fleet does.
    for kind, fixture in SIMS.items():
        vms = request.getfixturevalue(fixture).instances()
        assert sorted(str(vm_provider(kind, vm.tags)) for vm in vms) == sorted(PAIRS[kind])

    # Scans that would terminate an orphan at once find none, and leave every VM running.
    scanner = Scanner(engine, providers, missing_grace_s=0, orphan_grace_s=0)
    for provider in config.providers:
        report = scanner.scan(provider.id, provider.regions[0])
        assert report is not None and report.provider == provider.id
        assert (report.listed, report.orphans, report.terminated) == (1, 0, 0)
    for kind, fixture in SIMS.items():
        sim = request.getfixturevalue(fixture)
        ours = {workers[p].cloud_id for p in PAIRS[kind]}
        alive = {vm.cloud_id for vm in sim.instances() if vm.state not in ("gone", "stopping")}
        assert ours <= alive, kind

    # Each registers as worker-runner does; its credentials name its provider id verbatim.
    for provider in config.providers:
        worker = workers[provider.id]
        boot = boot_data(config, worker)
        assert (boot.provider_id, boot.worker_pool_id) == (provider.id, worker.pool_id)
        registered = taskcluster.WorkerManager({"rootUrl": api, "maxRetries": 0}).registerWorker(
            {
                "workerPoolId": boot.worker_pool_id,
                "providerId": boot.provider_id,
                "workerGroup": boot.worker_group,
                "workerId": boot.worker_id,
                "workerIdentityProof": dict(boot.proof),
            }
        )
        credentials = registered["credentials"]
        assert credentials["clientId"] == (
            f"worker/{provider.id}/{worker.pool_id}/{boot.worker_group}/{boot.worker_id}"
        )
        certificate = json.loads(credentials["certificate"])
        assert f"assume:worker-pool:{worker.pool_id}" in certificate["scopes"]
        # The credentials sign requests: Hawk takes the client id as it is.
        own = taskcluster.WorkerManager(
            {"rootUrl": api, "maxRetries": 0, "credentials": credentials}
        )
        answer = own.shouldWorkerTerminate(worker.pool_id, boot.worker_group, boot.worker_id)
        assert answer["terminate"] is False

    # The next scans see every worker running, each its own provider's.
    for provider in config.providers:
        scanner.scan(provider.id, provider.regions[0])
    rows = {w.provider_id: w for w in list_workers(engine)}
    assert {p: w.state for p, w in rows.items()} == dict.fromkeys(rows, WorkerState.RUNNING)
    assert {p: w.worker_id for p, w in rows.items()} == {p: w.worker_id for p, w in workers.items()}
