"""Taskcluster's own worker pool fixtures, as they are, through wm to the simulated clouds.

Worker-manager's test fixtures for AWS, Google and Azure (tests/fixtures/tc_pools, see its
README) are loaded both ways an operator gives wm definitions: through the API with the real
`taskcluster` client's createWorkerPool against `wm run web`, and with `wm pools apply FILE`
run as a subprocess; each way into a deployment of its own (a database each, on the same
simulated clouds). One pass of the real provisioner, with the real providers and SDKs, then
makes each launch config's create call, and the sims' record of that call is compared field by
field with the launch config plus exactly worker-manager's overrides and wm's own tags
(spelled out per cloud in tests/support/launch_expectations.py).

What had to change in a fixture, and why, is in tests/support/tc_pool_fixtures.py: the
providerId, the EC2 security group ids (EC2 names a group itself), a workerPool() answer's
read-only fields, and the maxCapacity of pools with several launch configs. The resources the
fixtures name (images, key pairs, security groups; an Azure subnet and image) are made in the
sims beforehand.

Three fixture launch configs make no VM, and the test says why:
- provider-google-test.json has no disks (Taskcluster's provider test fakes the Google API):
  its body reaches GCE, is compared like any other, and is refused for want of a boot disk;
- sample-google-config.json holds an EC2-style `launchConfig` beside the Google fields: the
  instances.insert API has no such field, so wm fails the launch before any call, naming it;
- sample-azure-arm-config.json is the ARM-template form: wm deploys it, and ARM refuses the
  deployment, for the template spec version it names was never published in this cloud.
provider-azure-test.json has no workerConfig, which Taskcluster's schema requires: both ways
refuse it, naming the key.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import taskcluster

from tests.support.api_stack import running_clouds
from tests.support.launch_expectations import (
    Launched,
    assert_field_by_field,
    azure_vm_name,
    create_error,
    expected_insert_body,
    expected_run_instances,
    expected_vm_put,
    sent_insert_body,
    sent_run_instances,
    take_generated_os_profile,
    worker_of,
)
from tests.support.tc_pool_fixtures import (
    LOADED,
    PROVIDER_IDS,
    SCHEMA_REFUSED,
    Deployment,
    FixtureClouds,
    FixturePool,
    definition,
    deployments,
    make_fixture_resources,
    write_definitions,
)
from wm.db import pool_errors
from wm.db.pools import load_launch_configs, load_pools
from wm.db.workers import list_workers
from wm.model import WorkerRecord, WorkerState

KINDS = ("aws", "gcp", "azure")


@dataclass(frozen=True)
class NoVm:
    """Why a launch config makes no VM."""

    code: str  # wm's error code (the pool error's title, the worker's stop reason)
    reached_the_cloud: bool  # whether the create was sent, and refused by the cloud
    words: str  # in the pool error's description


NO_VM = {
    ("provider-google-test.json", 0): NoVm("invalid", True, "Boot disk must be specified"),
    ("sample-google-config.json", 0): NoVm("invalidLaunchConfig", False, '"launchConfig"'),
    # Its create is a deployment PUT, which ARM refuses: no VM PUT is ever recorded.
    ("sample-azure-arm-config.json", 0): NoVm(
        "InvalidTemplateSpec", False, "Unable to retrieve the template content"
    ),
}


@pytest.fixture(scope="module")
def clouds(sim_arm_server) -> Iterator[FixtureClouds]:
    with running_clouds(sim_arm_server) as sims:
        yield make_fixture_resources(sims)


@pytest.fixture(scope="module")
def deployed(pg_server, template_db, clouds, tmp_path_factory) -> Iterator[dict[str, Deployment]]:
    tmp = tmp_path_factory.mktemp("tc-pool-fixtures")
    with deployments(pg_server.url, template_db, clouds, tmp) as made:
        yield made


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("way", ["api", "cli"])
def test_taskclusters_fixtures_load_and_launch_as_their_launch_configs_plus_the_overrides(
    deployed: dict[str, Deployment], clouds: FixtureClouds, tmp_path: Path, way: str, kind: str
):
    deployment = deployed[way]
    pools = [definition(fixture, clouds) for fixture in LOADED[kind]]

    if way == "api":
        load_through_the_api(deployment, pools)
    else:
        load_with_wm_pools_apply(deployment, pools, tmp_path)
    assert_stored_verbatim(deployment, pools)
    already_recorded = len(recorded_creates(clouds, kind))
    deployment.provisioning_pass(kind, {p.pool_id: p.total_capacity for p in pools})
    creates = recorded_creates(clouds, kind)[already_recorded:]

    own_creates = [
        check_launch(deployment, kind, pool, index, worker, creates)
        for pool in pools
        for index, worker in enumerate(one_worker_per_launch_config(deployment, pool))
    ]
    # Nothing else reached the cloud.
    assert len(creates) == sum(own_creates)


def test_a_fixture_taskclusters_schema_refuses_is_refused_by_the_api_naming_its_key(
    deployed: dict[str, Deployment], clouds: FixtureClouds
):
    deployment = deployed["api"]
    pool = definition(SCHEMA_REFUSED, clouds)

    with pytest.raises(taskcluster.TaskclusterRestFailure) as refused:
        deployment.client().createWorkerPool(pool.pool_id, copy.deepcopy(pool.body))

    assert (refused.value.status_code, refused.value.body["code"]) == (400, "InputValidationError")
    assert "config.launchConfigs[0].workerConfig" in refused.value.body["message"]
    assert all(p.pool_id != pool.pool_id for p in load_pools(deployment.engine))


def test_a_fixture_taskclusters_schema_refuses_is_refused_by_wm_pools_apply_naming_its_key(
    deployed: dict[str, Deployment], clouds: FixtureClouds, tmp_path: Path
):
    deployment = deployed["cli"]
    pool = definition(SCHEMA_REFUSED, clouds)

    done = deployment.pools_apply(write_definitions(tmp_path / "refused.yml", [pool]))

    assert done.returncode == 2, done.stdout
    assert f"{pool.pool_id}: config.launchConfigs[0].workerConfig" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert all(p.pool_id != pool.pool_id for p in load_pools(deployment.engine))


# -- loading ---------------------------------------------------------------------------------------


def load_through_the_api(deployment: Deployment, pools: list[FixturePool]) -> None:
    """createWorkerPool with the real client; the answer is the definition, each launch config
    with the id it goes by (its own, or the one derived for it)."""
    client = deployment.client()
    for pool in pools:
        answer = client.createWorkerPool(pool.pool_id, copy.deepcopy(pool.body))
        assert answer["workerPoolId"] == pool.pool_id
        for key in ("providerId", "description", "owner", "emailOnError"):
            assert answer[key] == pool.body[key], key
        given = pool.body["config"]
        assert {k: v for k, v in answer["config"].items() if k != "launchConfigs"} == {
            k: v for k, v in given.items() if k != "launchConfigs"
        }
        # In an order of wm's choosing (Taskcluster's jsonb_agg promises none).
        answered = answer["config"]["launchConfigs"]
        ids = {launch_config_id_of(lc, answered) for lc in given["launchConfigs"]}
        assert len(ids) == len(answered) == len(given["launchConfigs"])


def load_with_wm_pools_apply(
    deployment: Deployment, pools: list[FixturePool], tmp_path: Path
) -> None:
    done = deployment.pools_apply(write_definitions(tmp_path / "pools.yml", pools))
    assert done.returncode == 0, done.stderr
    for pool in pools:
        assert f"create pool {pool.pool_id} on {pool.body['providerId']}" in done.stdout


def assert_stored_verbatim(deployment: Deployment, pools: list[FixturePool]) -> None:
    """The database holds each definition as given, and each launch config with its id."""
    stored = {p.pool_id: p for p in load_pools(deployment.engine)}
    launch_configs = load_launch_configs(deployment.engine)
    for pool in pools:
        record = stored[pool.pool_id]
        assert (record.provider_id, record.owner) == (pool.body["providerId"], pool.body["owner"])
        assert record.config == pool.body["config"]
        stored_lcs = [lc.configuration for lc in launch_configs if lc.pool_id == pool.pool_id]
        ids = [launch_config_id_of(lc, stored_lcs) for lc in pool.launch_configs]
        assert len(set(ids)) == len(ids) == len(stored_lcs)


def launch_config_id_of(
    launch_config: Mapping[str, Any], stored: Sequence[Mapping[str, Any]]
) -> str:
    """The id of the one stored (or answered) launch config that is this one verbatim, its
    workerManager.launchConfigId filled in: the launch config's own, or the derived one."""
    found = []
    for candidate in stored:
        launch_config_id = candidate["workerManager"]["launchConfigId"]
        manager = {**launch_config.get("workerManager", {}), "launchConfigId": launch_config_id}
        if dict(candidate) == {**launch_config, "workerManager": manager}:
            found.append(launch_config_id)
    assert len(found) == 1, (launch_config, stored)
    given = launch_config.get("workerManager", {}).get("launchConfigId")
    assert given in (None, found[0])
    return found[0]


# -- the pass --------------------------------------------------------------------------------------


def one_worker_per_launch_config(deployment: Deployment, pool: FixturePool) -> list[WorkerRecord]:
    """The pool's workers, in the order of its launch configs: exactly one each."""
    stored = [
        lc.configuration
        for lc in load_launch_configs(deployment.engine)
        if lc.pool_id == pool.pool_id
    ]
    workers = list_workers(deployment.engine, pool_id=pool.pool_id)
    ordered = []
    for launch_config in pool.launch_configs:
        launch_config_id = launch_config_id_of(launch_config, stored)
        (worker,) = [w for w in workers if w.launch_config_id == launch_config_id]
        ordered.append(worker)
    assert len(workers) == len(ordered), pool.pool_id
    return ordered


def worker_group(kind: str, launch_config: Mapping[str, Any]) -> str:
    """Where worker-manager takes a launch config's worker group from."""
    if kind == "aws":
        return launch_config["region"]
    if kind == "gcp":
        return launch_config["zone"]
    if "armDeployment" in launch_config:
        return launch_config["armDeployment"]["parameters"]["location"]["value"]
    return launch_config["location"]


def recorded_creates(clouds: FixtureClouds, kind: str) -> list[Any]:
    sim = clouds.sims[kind]
    if kind == "aws":
        return sim.launch_requests()
    if kind == "gcp":
        return sim.inserts()
    return sim.vm_puts()


def assert_create_is_the_launch_config(
    kind: str,
    deployment: Deployment,
    create: Any,
    pool: FixturePool,
    launch_config: Mapping[str, Any],
    worker: WorkerRecord,
    where: str,
) -> None:
    config = deployment.config()
    provider = config.provider(PROVIDER_IDS[kind])
    assert worker.batch_token is not None
    launched = Launched(
        pool_id=pool.pool_id,
        owner=pool.body["owner"],
        description=pool.body["description"],
        provider_id=provider.id,
        deployment_id=config.deployment_id,
        root_url=config.root_url,
        launch_config_id=worker.launch_config_id,
        worker_id=worker.worker_id,
        batch_token=worker.batch_token,
        worker_group=worker_group(kind, launch_config),
    )
    if kind == "aws":
        assert create.region == launched.worker_group, where
        sent = sent_run_instances(create.parameters)
        expected = expected_run_instances(launch_config, launched)
    elif kind == "gcp":
        assert (create.project, create.zone) == (provider.project, launched.worker_group), where
        sent = sent_insert_body(create.body)
        account = provider.worker_service_account_email
        expected = expected_insert_body(launch_config, launched, account)
    else:
        group = f"/resourceGroups/{provider.resource_group}/"
        assert create.name == azure_vm_name(launched) and group in create.resource_id, where
        sent = copy.deepcopy(create.body)
        take_generated_os_profile(sent, launched)
        expected = expected_vm_put(launch_config, launched)
    assert_field_by_field(sent, expected, where)


def check_launch(
    deployment: Deployment,
    kind: str,
    pool: FixturePool,
    index: int,
    worker: WorkerRecord,
    creates: list[Any],
) -> int:
    """One launch config's launch: its create call compared field by field, and its VM, or
    the pool error saying why there is none. Returns how many create calls were its own."""
    launch_config = pool.launch_configs[index]
    where = f"{pool.fixture.name} launchConfigs[{index}]"
    assert worker.worker_group == worker_group(kind, launch_config), where
    calls = [c for c in creates if worker_of(kind, c) == worker.worker_id]
    no_vm = NO_VM.get((pool.fixture.name, index))
    if no_vm is not None and not no_vm.reached_the_cloud:
        assert calls == [], where
    else:
        assert len(calls) == 1, f"{where}: {len(calls)} create calls"
        assert_create_is_the_launch_config(
            kind, deployment, calls[0], pool, launch_config, worker, where
        )
    if no_vm is None:
        assert create_error(kind, calls[0]) is None, where
        assert worker.cloud_id and worker.state is WorkerState.REQUESTED, where
    else:
        assert [create_error(kind, c) for c in calls] == [no_vm.code] * len(calls), where
        assert_no_vm_and_a_pool_error(deployment, pool, worker, no_vm, where)
    return len(calls)


def assert_no_vm_and_a_pool_error(
    deployment: Deployment, pool: FixturePool, worker: WorkerRecord, no_vm: NoVm, where: str
) -> None:
    """A definite refusal: the row stops, and the pool shows why."""
    assert (worker.state, worker.cloud_id) == (WorkerState.STOPPED, None), where
    assert worker.stop_reason == f"launch failed: bad-config {no_vm.code}", where
    errors = pool_errors.list_errors(deployment.engine, pool.pool_id)
    titles = [(e.title, e.launch_config_id) for e in errors]
    assert titles == [(f"launch failed: {no_vm.code}", worker.launch_config_id)], where
    assert no_vm.words in errors[0].description, errors[0].description
