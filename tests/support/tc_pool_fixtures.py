"""Taskcluster's own worker pool fixtures (tests/fixtures/tc_pools) as the definitions a wm
deployment is given, the cloud resources they name made in the simulated clouds, and the
deployments that load them: each its own database and config.toml on the same clouds, one with
`wm run web` for the API, one for `wm pools apply` run as a subprocess.

Substituted in a fixture, and only there (everything else is the file's, byte for byte):
- `providerId`: the deployment's provider of the fixture's cloud (a config alone, as the
  provider tests and schema samples hold it, gets the definition's other keys here: this
  module's provider, description, owner and emailOnError = false);
- an EC2 `SecurityGroupIds` entry: EC2 (and moto) choose a group's id when it is made, so the
  group made for `sg-yadayada` has an id of EC2's choosing, which replaces it;
- a `workerPool()` answer (sample-aws-worker-pool-full.json): its read-only fields (the
  deprecated counts, `created`, `lastModified`) are left out, as createWorkerPool's schema
  refuses them, and its `workerPoolId` names the pool;
- `config.maxCapacity` of a pool with several launch configs: raised to their total capacity,
  so that one pass launches on each (wm chooses launch configs deterministically, and a pool of
  at most one worker launches on one). A pool bound: no launch config holds it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config as BotoConfig
from sqlalchemy import Engine

from tests.fixtures.sim_arm import make_subnet
from tests.support.api_stack import OPERATOR_CLIENT, OPERATOR_TOKEN, database, http_call
from tests.support.stack import (
    AZURE_SUBSCRIPTION,
    REPO,
    Stack,
    aws_provider,
    azure_provider,
    gcp_provider,
)
from wm.config.loader import Config
from wm.db import tasks
from wm.db.engine import make_engine
from wm.providers import build_provider
from wm.provisioning.provisioner import PoolPassReport, Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.config import simulated_child_environment
from wmsim.postgres import free_port

FIXTURES = REPO / "tests" / "fixtures" / "tc_pools"
OWNER = "tc-fixtures@example.com"  # the owner of a fixture that is a config alone
PROVIDER_IDS = {"aws": "aws-sim", "gcp": "gcp-sim", "azure": "azure-sim"}
# The fixtures' worker groups: wm launches only where its provider scans.
REGIONS = {
    "aws": ["us-east-1", "us-west-1", "us-west-2"],
    "gcp": ["us-east1-a", "darkness"],  # sample-google-config.json's zone is "darkness"
    "azure": ["eastus", "westus"],  # eastus: the ARM-template sample's location
}
# A workerPool() answer's fields that createWorkerPool's body may not hold.
CREATE_KEYS = ("providerId", "description", "config", "owner", "emailOnError")
WEB_START_S = 60.0
CLI_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class FixtureFile:
    """A fixture file and the pool it becomes (a workerPool() answer names its own)."""

    name: str
    pool_id: str
    kind: str

    def read(self) -> dict[str, Any]:
        return json.loads((FIXTURES / self.name).read_text())

    def launch_configs(self) -> list[dict[str, Any]]:
        raw = self.read()
        return list(raw.get("config", raw)["launchConfigs"])


# Taskcluster's worker-manager fixtures for AWS, Google and Azure (resource and ARM form).
LOADED = {
    "aws": (
        FixtureFile("sample-aws-config.json", "tc-fixtures/sample-aws-config", "aws"),
        FixtureFile("sample-aws-worker-pool-full.json", "delete/worker", "aws"),
        FixtureFile("provider-aws-test.json", "tc-fixtures/provider-aws-test", "aws"),
        FixtureFile("api-test-update-launch-configs.json", "tc-fixtures/api-test-update", "aws"),
    ),
    "gcp": (
        FixtureFile("provider-google-test.json", "tc-fixtures/provider-google-test", "gcp"),
        FixtureFile("sample-google-config.json", "tc-fixtures/sample-google-config", "gcp"),
    ),
    "azure": (
        FixtureFile("sample-azure-config.json", "tc-fixtures/sample-azure-config", "azure"),
        FixtureFile("sample-azure-arm-config.json", "tc-fixtures/sample-azure-arm", "azure"),
    ),
}
# config-azure.yml requires workerConfig, which Taskcluster's provider test (writing straight to
# its database) never gives: Taskcluster's API would refuse it, and so does wm.
SCHEMA_REFUSED = FixtureFile("provider-azure-test.json", "tc-fixtures/provider-azure-test", "azure")


@dataclass(frozen=True)
class FixturePool:
    """A fixture as the worker pool definition a deployment is given."""

    fixture: FixtureFile
    pool_id: str
    body: dict[str, Any]  # a createWorkerPool body

    @property
    def document(self) -> dict[str, Any]:
        """As `wm pools apply` reads it from a file."""
        return {"workerPoolId": self.pool_id, **copy.deepcopy(self.body)}

    @property
    def launch_configs(self) -> list[dict[str, Any]]:
        return self.body["config"]["launchConfigs"]

    @property
    def total_capacity(self) -> int:
        return sum(capacity_per_instance(lc) for lc in self.launch_configs)


def capacity_per_instance(launch_config: Mapping[str, Any]) -> int:
    """workerManager's, else the deprecated top-level key, else 1 (as worker-manager reads it)."""
    manager = launch_config.get("workerManager") or {}
    return int(manager.get("capacityPerInstance") or launch_config.get("capacityPerInstance") or 1)


@dataclass(frozen=True)
class FixtureClouds:
    """The simulated clouds, holding what the fixtures' launch configs name."""

    sims: Mapping[str, Any]  # kind -> SimEc2 / SimGce / SimArm
    # (region, the fixture's group id) -> the id EC2 gave the group made for it.
    security_groups: Mapping[tuple[str, str], str] = field(default_factory=dict)


def definition(fixture: FixtureFile, clouds: FixtureClouds) -> FixturePool:
    """The fixture as the definition a deployment of these clouds is given: the file's, with
    the substitutions this module's docstring lists and nothing else."""
    raw = fixture.read()
    pool_id = raw.get("workerPoolId", fixture.pool_id)
    if "config" in raw:  # a whole definition, or a workerPool() answer
        body = {key: raw[key] for key in CREATE_KEYS}
    else:  # a config alone
        body = {
            "description": f"Taskcluster's worker-manager fixture {fixture.name}",
            "owner": OWNER,
            "emailOnError": False,
            "config": raw,
        }
    body["providerId"] = PROVIDER_IDS[fixture.kind]
    config = body["config"]
    if fixture.kind == "aws":
        for launch_config in config["launchConfigs"]:
            _substitute_security_groups(launch_config, clouds)
    if len(config["launchConfigs"]) > 1:
        config["maxCapacity"] = sum(capacity_per_instance(lc) for lc in config["launchConfigs"])
    return FixturePool(fixture, pool_id, body)


def _substitute_security_groups(launch_config: dict[str, Any], clouds: FixtureClouds) -> None:
    region, spec = launch_config["region"], launch_config["launchConfig"]
    if "SecurityGroupIds" in spec:
        spec["SecurityGroupIds"] = [
            clouds.security_groups[(region, group)] for group in spec["SecurityGroupIds"]
        ]


# -- the clouds -----------------------------------------------------------------------------------


def make_fixture_resources(sims: Mapping[str, Any]) -> FixtureClouds:
    """Make what the fixtures' launch configs name, as an operator does before applying them.

    The Google fixtures name nothing to make: their `disks` and `networkInterfaces` are empty
    and their machine types are GCE's own.
    """
    groups: dict[tuple[str, str], str] = {}
    for fixture in LOADED["aws"]:
        for launch_config in fixture.launch_configs():
            groups.update(_make_ec2_resources(sims["aws"], launch_config))
    for fixture in LOADED["azure"]:
        for launch_config in fixture.launch_configs():
            if "armDeployment" not in launch_config:
                _make_azure_resources(sims["azure"], launch_config)
    # The provider's own resource group exists, as an operator made it; the template spec the
    # ARM fixture names does not (ARM refuses its deployment: InvalidTemplateSpec).
    sims["azure"].deployments.create_resource_group(AZURE_SUBSCRIPTION, "wm-test", "eastus")
    return FixtureClouds(sims, groups)


def _make_ec2_resources(sim: Any, launch_config: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    region, spec = launch_config["region"], launch_config["launchConfig"]
    ec2 = boto3.client(
        "ec2",
        endpoint_url=sim.endpoint,
        region_name=region,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=BotoConfig(retries={"total_max_attempts": 1}),
    )
    # An image is registered with the sim (EC2 picks the id of an image made with the SDK;
    # the sim takes any id, even those EC2 would call malformed, like `banana-123`).
    sim.register_image(spec["ImageId"], region)
    key = spec.get("KeyName")
    if (
        key
        and not ec2.describe_key_pairs(Filters=[{"Name": "key-name", "Values": [key]}])["KeyPairs"]
    ):
        ec2.create_key_pair(KeyName=key)
    made = {}
    [default_vpc] = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    for group in spec.get("SecurityGroupIds") or []:
        # A group name may not start with "sg-"; its id is EC2's to choose.
        name, vpc_id = group.removeprefix("sg-"), default_vpc["VpcId"]
        found = ec2.describe_security_groups(
            Filters=[
                {"Name": "group-name", "Values": [name]},
                {"Name": "vpc-id", "Values": [vpc_id]},
            ]
        )["SecurityGroups"]
        if not found:
            found = [
                ec2.create_security_group(
                    GroupName=name,
                    Description=f"for Taskcluster's fixture group {group}",
                    VpcId=vpc_id,
                )
            ]
        made[(region, group)] = found[0]["GroupId"]
    ec2.close()
    return made


def _make_azure_resources(sim: Any, launch_config: Mapping[str, Any]) -> None:
    location = launch_config["location"]
    make_subnet(sim, launch_config["subnetId"], location)
    image = (launch_config.get("storageProfile") or {}).get("imageReference") or {}
    if "id" in image:
        sim.register_image(image["id"], location)


# -- the deployments ------------------------------------------------------------------------------


@dataclass
class Deployment:
    """wm on the fixtures' clouds, with a database of its own."""

    name: str
    config_path: Path
    db_url: str
    engine: Engine
    base_url: str  # the web process's (only the API deployment runs one)

    def config(self) -> Config:
        from wm.config import loader as config_module

        return config_module.load(self.config_path, environ={"DATABASE_URL": self.db_url})

    def client(self) -> Any:
        """The real taskcluster client, with the operator's credentials, no retries."""
        import taskcluster

        credentials = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
        return taskcluster.WorkerManager(
            {"rootUrl": self.base_url, "credentials": credentials, "maxRetries": 0}
        )

    def pools_apply(self, *files: Path) -> subprocess.CompletedProcess[str]:
        """`wm pools apply FILE...` as an operator runs it."""
        return subprocess.run(
            [sys.executable, "-m", "wm", "pools", "apply", *map(str, files)],
            capture_output=True,
            text=True,
            env=simulated_child_environment(self.config_path, self.db_url),
            cwd=REPO,
            timeout=CLI_TIMEOUT_S,
        )

    def provisioning_pass(self, kind: str, demand: Mapping[str, int]) -> list[PoolPassReport]:
        """Tasks submitted to the builtin queue, then one pass of the real provisioner with the
        real provider (built as the processes build it) against the simulated cloud."""
        for pool_id, count in demand.items():
            tasks.submit_tasks(self.engine, pool_id, count, 60.0)
        config = self.config()
        provider_id = PROVIDER_IDS[kind]
        provider = build_provider(
            config.provider(provider_id), config.deployment_id, root_url=config.root_url
        )
        try:
            queue = BuiltinQueue(self.engine)
            return Provisioner(self.engine, queue, {provider_id: provider}).run_pass(provider_id)
        finally:
            provider.close()


@contextlib.contextmanager
def deployments(
    pg_server_url: str, template: str, clouds: FixtureClouds, tmp: Path
) -> Iterator[dict[str, Deployment]]:
    """ "api": `wm run web` up and healthy; "cli": a database for `wm pools apply`. The same
    config.toml for both: the providers of the three clouds, with the fixtures' regions."""
    sims = clouds.sims
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    providers = [
        aws_provider(
            sims["aws"],
            PROVIDER_IDS["aws"],
            regions=REGIONS["aws"],
            identity_certificate=str(sims["aws"].identity_trust_path),
        ),
        gcp_provider(
            sims["gcp"],
            PROVIDER_IDS["gcp"],
            regions=REGIONS["gcp"],
            identity_jwks=str(sims["gcp"].identity_trust_path),
        ),
        azure_provider(
            sims["azure"],
            PROVIDER_IDS["azure"],
            regions=REGIONS["azure"],
            identity_roots=[str(sims["azure"].identity_trust_path)],
        ),
    ]
    with (
        database(pg_server_url, template) as api_url,
        database(pg_server_url, template) as cli_url,
    ):
        stack = Stack.write(tmp, api_url, providers, [], web={"port": port}, root_url=base_url)
        made = {
            name: Deployment(name, stack.path, url, make_engine(url), base_url)
            for name, url in (("api", api_url), ("cli", cli_url))
        }
        try:
            with pytest.MonkeyPatch.context() as env:
                env.setenv("WM_OPERATOR_TOKEN", OPERATOR_TOKEN)  # the web process reads it
                web = stack.start("web")
            web.wait_for(lambda: _healthy(base_url), WEB_START_S, "the web process to answer")
            yield made
        finally:
            stack.stop_all()
            for deployment in made.values():
                deployment.engine.dispose()


def _healthy(base_url: str) -> bool:
    try:
        return http_call(base_url, "GET", "/healthz", timeout_s=2).status == 200
    except OSError:
        return False


def write_definitions(path: Path, pools: Sequence[FixturePool]) -> Path:
    """The definitions as an operator keeps them in git: YAML, one document each."""
    import yaml

    path.write_text(yaml.safe_dump_all([p.document for p in pools], sort_keys=False))
    return path
