"""The two public Taskcluster deployments' worker pool definitions load and launch.

Community-tc's 54 pools and Firefox CI's 384 (tests/fixtures/real_pools, made by the
deployments' own tc-admin generators) are applied with `wm pools apply` run as a subprocess,
in the form tc-admin produces (one JSON list of `{workerPoolId, providerId, description,
owner, emailOnError, config}`), under configs naming each deployment's providers as it does.
Every pool is taken, dry run and real, community-tc's two hardware pools too: they name
worker-manager's static provider, which community-tc's config names as wm's static kind.

Then one real pool per cloud kind (Firefox CI's: an AWS pool with additionalUserData, a Google
pool with GPUs, STANDARD provisioning and `onHostMaintenance: "terminate"`, an Azure
ARM-template pool) launches on the simulated clouds, seeded with the subnets, security groups,
images and template specs it names, and each create the clouds receive is the launch config
verbatim plus exactly worker-manager's overrides (tests/support/launch_expectations.py).

Where a simulator cannot take an id as given: none of EC2's (the simulated EC2 makes subnets
and security groups with the deployment's ids, which real EC2 and moto would choose
themselves); the ARM template specs' text is not public, so each template spec version is
published at its real id holding wmsim's template of the same interface (wmsim/azure/templates).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.api_stack import running_clouds
from tests.support.launch_expectations import (
    Launched,
    assert_field_by_field,
    create_error,
    expected_deployment_put,
    expected_insert_body,
    expected_run_instances,
    sent_insert_body,
    sent_run_instances,
    take_generated_parameters,
    worker_of,
)
from tests.support.real_pools import (
    config_on_sims,
    definitions,
    pool,
    provider_kinds,
    seed_arm,
    seed_ec2,
    seed_gce,
    write_config,
    write_definitions,
)
from tests.support.stack import REPO
from wm.config import loader as config_module
from wm.db import tasks
from wm.db.engine import make_engine
from wm.db.pools import load_launch_configs, load_pools
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.azure.templates import WORKER_TEMPLATE
from wmsim.config import simulated_child_environment

CLI_TIMEOUT_S = 120.0
STATIC_POOLS = ("proj-taskcluster/gw-ci-freebsd", "proj-taskcluster/gw-ci-macos")
REAL_CONFIGS = REPO / "tests" / "fixtures" / "real_pools"
# One Firefox CI pool per cloud kind, and its provider.
LAUNCHED = {
    "aws": ("proj-fuzzing/bugmon-pernosco-staging", "aws"),
    "gcp": ("translations-1/b-linux-v100-gpu-d2g-4-300gb-standard", "fxci-level1-gcp"),
    "azure": ("proj-fuzzing/ci-windows", "azure2"),
}


def pools_apply(config: Path, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`wm pools apply ...` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "wm", "pools", "apply", *args],
        capture_output=True,
        text=True,
        env=simulated_child_environment(config, db_url),
        cwd=REPO,
        timeout=CLI_TIMEOUT_S,
    )


def launch_config_count(documents: list[dict[str, Any]]) -> int:
    """The launch configs wm stores for these pools: each static pool has one, holding its
    workerConfig for its hand-made workers (wm.pools.definition.HAND_MADE_LAUNCH_CONFIG_ID)."""
    return sum(
        1 if d["workerPoolId"] in STATIC_POOLS else len(d["config"].get("launchConfigs") or [])
        for d in documents
    )


# -- loading ---------------------------------------------------------------------------------------


def test_community_tcs_two_static_pools_apply_on_its_static_provider(
    db_url: str, engine, tmp_path: Path
):
    documents = [d for d in definitions("community-tc") if d["workerPoolId"] in STATIC_POOLS]
    assert [d["providerId"] for d in documents] == ["static", "static"]
    assert provider_kinds("community-tc")["static"] == "static"
    file = write_definitions(tmp_path / "static.json", documents)

    dry = pools_apply(REAL_CONFIGS / "community-tc.toml", db_url, "--dry-run", str(file))

    assert dry.returncode == 0, dry.stderr
    assert [line for line in dry.stdout.splitlines() if line.startswith("create pool ")] == [
        f"create pool {pool_id} on static" for pool_id in STATIC_POOLS
    ]
    assert load_pools(engine) == []

    real = pools_apply(REAL_CONFIGS / "community-tc.toml", db_url, str(file))

    assert real.returncode == 0, real.stderr
    stored = {p.pool_id: p for p in load_pools(engine)}
    assert sorted(stored) == sorted(STATIC_POOLS)
    for document in documents:
        assert stored[document["workerPoolId"]].config == document["config"]


@pytest.mark.parametrize("deployment", ["community-tc", "firefoxci"])
def test_every_pool_applies_dry_run_then_for_real_then_changes_nothing(
    deployment: str, db_url: str, engine, tmp_path: Path
):
    documents = definitions(deployment)
    file = write_definitions(tmp_path / f"{deployment}.json", documents)
    config = REAL_CONFIGS / f"{deployment}.toml"
    kinds = provider_kinds(deployment)
    assert {d["providerId"] for d in documents} <= set(kinds)

    dry = pools_apply(config, db_url, "--dry-run", str(file))

    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    created = [line for line in lines if line.startswith("create pool ")]
    assert created == [f"create pool {d['workerPoolId']} on {d['providerId']}" for d in documents]
    launch_configs = [line for line in lines if line.startswith("create launch config ")]
    assert len(launch_configs) == launch_config_count(documents)
    assert lines[-1] == "dry run: nothing changed"
    assert load_pools(engine) == []

    started = time.monotonic()
    real = pools_apply(config, db_url, str(file))
    took_s = time.monotonic() - started

    assert real.returncode == 0, real.stderr
    stored = {p.pool_id: p for p in load_pools(engine)}
    assert set(stored) == {d["workerPoolId"] for d in documents}
    for document in documents:
        record = stored[document["workerPoolId"]]
        assert (record.provider_id, record.owner, record.description) == (
            document["providerId"],
            document["owner"],
            document["description"],
        )
        assert record.email_on_error == document["emailOnError"]
        assert record.config == document["config"]
    assert len(load_launch_configs(engine)) == launch_config_count(documents)
    # Hundreds of pools and thousands of launch configs in one transaction: seconds.
    assert took_s < 60, f"applying {len(documents)} pools took {took_s:.1f} s"

    again = pools_apply(config, db_url, str(file))

    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "the database already holds these definitions: nothing to do"


# -- launching -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clouds(sim_arm_server) -> Iterator[dict[str, Any]]:
    with running_clouds(sim_arm_server) as sims:
        yield sims


def launched_pool(kind: str) -> dict[str, Any]:
    pool_id, provider_id = LAUNCHED[kind]
    found = pool("firefoxci", pool_id)
    assert found["providerId"] == provider_id
    return found


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_a_real_pool_launches_and_each_create_is_its_launch_config_plus_the_overrides(
    kind: str, clouds: dict[str, Any], db_url: str, tmp_path: Path
):
    definition = launched_pool(kind)
    launch_configs = definition["config"]["launchConfigs"]
    provider_id = definition["providerId"]
    sim = clouds[kind]
    data = config_on_sims("firefoxci", clouds, only=[provider_id])
    config_path = write_config(tmp_path / "config.toml", data)
    config = config_module.load(config_path, environ={"DATABASE_URL": db_url})
    provider_config = config.provider(provider_id)
    if kind == "aws":
        seed_ec2(sim, launch_configs)
    elif kind == "gcp":
        seed_gce(sim, launch_configs)
    else:
        group = (provider_config.subscription_id, provider_config.resource_group)
        seed_arm(sim, launch_configs, json.loads(WORKER_TEMPLATE.read_text()), group)
    file = write_definitions(tmp_path / "pool.json", [definition])
    applied = pools_apply(config_path, db_url, str(file))
    assert applied.returncode == 0, applied.stderr
    already = len(recorded_creates(kind, sim))
    engine = make_engine(db_url)
    # Scenario: as many tasks as the pool has launch configs (within its maximum) are pending.
    demand = min(len(launch_configs), definition["config"]["maxCapacity"])

    try:
        tasks.submit_tasks(engine, definition["workerPoolId"], demand, 60.0)
        provider = build_provider(provider_config, config.deployment_id, root_url=config.root_url)
        try:
            Provisioner(engine, BuiltinQueue(engine), {provider_id: provider}).run_pass(provider_id)
        finally:
            provider.close()
        workers = list_workers(engine, pool_id=definition["workerPoolId"])
    finally:
        engine.dispose()

    creates = recorded_creates(kind, sim)[already:]
    assert len(workers) == demand
    assert len(creates) == demand
    by_id = {lc["workerManager"]["launchConfigId"]: lc for lc in launch_configs}
    for worker in workers:
        where = f"{definition['workerPoolId']} {worker.launch_config_id}"
        (create,) = [c for c in creates if worker_of(kind, c) == worker.worker_id]
        assert create_error(kind, create) is None, (where, create)
        assert worker.cloud_id and worker.state is WorkerState.REQUESTED, where
        launch_config = by_id[worker.launch_config_id]
        launched = Launched(
            pool_id=definition["workerPoolId"],
            owner=definition["owner"],
            description=definition["description"],
            provider_id=provider_id,
            deployment_id=config.deployment_id,
            root_url=config.root_url,
            launch_config_id=worker.launch_config_id,
            worker_id=worker.worker_id,
            batch_token=str(worker.batch_token),
            worker_group=worker.worker_group,
        )
        assert_create_is(kind, create, launch_config, launched, provider_config, where)


def recorded_creates(kind: str, sim: Any) -> list[Any]:
    if kind == "aws":
        return sim.launch_requests()
    if kind == "gcp":
        return sim.inserts()
    return sim.deployments.puts()


def assert_create_is(
    kind: str,
    create: Any,
    launch_config: Mapping[str, Any],
    launched: Launched,
    provider: Any,
    where: str,
) -> None:
    if kind == "aws":
        assert create.region == launched.worker_group == launch_config["region"], where
        sent = sent_run_instances(create.parameters)
        expected = expected_run_instances(launch_config, launched)
    elif kind == "gcp":
        assert (create.project, create.zone) == (provider.project, launch_config["zone"]), where
        sent = sent_insert_body(create.body)
        account = provider.worker_service_account_email
        expected = expected_insert_body(launch_config, launched, account)
    else:
        group = f"/resourceGroups/{launch_config['armDeploymentResourceGroup']}/"
        assert group in create.resource_id, where
        sent = copy.deepcopy(create.body)
        take_generated_parameters(sent, launched)
        expected = expected_deployment_put(launch_config, launched)
    assert_field_by_field(sent, expected, where)
