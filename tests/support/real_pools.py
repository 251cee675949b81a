"""The two public Taskcluster deployments' worker pool definitions (tests/fixtures/real_pools,
see its README) as test data: the definitions as tc-admin sends them, the configs naming the
deployments' providers, and what a simulated cloud must hold before a launch config that names
the deployment's real subnets, security groups, images and template specs can launch.

Nothing in a definition is changed here: where a simulator cannot take an id as given, the
test that launches says so.
"""

from __future__ import annotations

import gzip
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.stack import FAST_GATE, REPO, to_toml

REAL_POOLS = REPO / "tests" / "fixtures" / "real_pools"
DEPLOYMENTS = ("community-tc", "firefoxci")
GCE_IMAGE = re.compile(r"projects/(?P<project>[^/]+)/global/images/(?P<name>[^/]+)")


def definitions(deployment: str) -> list[dict[str, Any]]:
    """The deployment's definitions, `{workerPoolId, providerId, description, owner,
    emailOnError, config}` each, in the generator's order."""
    with gzip.open(REAL_POOLS / f"{deployment}-pools.json.gz", "rt") as opened:
        return json.load(opened)


def raw_config(deployment: str) -> dict[str, Any]:
    return tomllib.loads((REAL_POOLS / f"{deployment}.toml").read_text())


def provider_kinds(deployment: str) -> dict[str, str]:
    return {p["id"]: p["kind"] for p in raw_config(deployment)["providers"]}


def pool(deployment: str, pool_id: str) -> dict[str, Any]:
    (found,) = [d for d in definitions(deployment) if d["workerPoolId"] == pool_id]
    return found


def write_definitions(path: Path, documents: Sequence[Mapping[str, Any]]) -> Path:
    """As tc-admin's output is kept: one JSON list."""
    path.write_text(json.dumps(list(documents), indent=1))
    return path


def config_on_sims(
    deployment: str,
    sims: Mapping[str, Any],
    *,
    only: Sequence[str] | None = None,
    extra_providers: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The deployment's config with every provider's endpoint the test's own simulated cloud
    (the ARM one over HTTPS with its certificate) and a fast gate; `only` keeps those
    providers alone. A provider of a kind with no simulated cloud (static) stays as it is."""
    data = raw_config(deployment)
    providers = []
    for provider in data["providers"]:
        if only is not None and provider["id"] not in only:
            continue
        sim = sims.get(provider["kind"])
        if sim is None:  # a kind with no cloud (static): nothing to point anywhere
            providers.append(dict(provider))
            continue
        changed = {**provider, "endpoint": sim.endpoint, "gate": dict(FAST_GATE)}
        if provider["kind"] == "azure":
            changed["ca_bundle"] = str(sim.cert_path)
        providers.append(changed)
    return {**data, "providers": [*providers, *map(dict, extra_providers)]}


def write_config(path: Path, data: Mapping[str, Any]) -> Path:
    path.write_text(to_toml(dict(data)))
    return path


# -- what the simulated clouds must hold -----------------------------------------------------------


def seed_ec2(sim: Any, launch_configs: Sequence[Mapping[str, Any]]) -> None:
    """The images, subnets and security groups the launch configs name, with their ids: the
    deployment's own (EC2 chose them; the simulated EC2 takes them as given)."""
    for launch_config in launch_configs:
        region, spec = launch_config["region"], launch_config["launchConfig"]
        sim.register_image(spec["ImageId"], region)
        if "SubnetId" in spec:
            zone = (spec.get("Placement") or {}).get("AvailabilityZone") or f"{region}a"
            sim.add_subnet(spec["SubnetId"], zone)
        for group in spec.get("SecurityGroupIds") or []:
            sim.add_security_group(group, region)


def seed_gce(sim: Any, launch_configs: Sequence[Mapping[str, Any]]) -> None:
    """The images the launch configs' disks are made from, in the deployment's image projects
    (their networks are the project's `default`, which every simulated project has)."""
    seen: set[tuple[str, str]] = set()
    for launch_config in launch_configs:
        for disk in launch_config.get("disks") or []:
            source = (disk.get("initializeParams") or {}).get("sourceImage")
            match = GCE_IMAGE.fullmatch(source or "")
            if match and (match["project"], match["name"]) not in seen:
                seen.add((match["project"], match["name"]))
                sim.add_image(match["project"], match["name"])


def seed_arm(
    sim: Any,
    launch_configs: Sequence[Mapping[str, Any]],
    template: Mapping[str, Any],
    provider_group: tuple[str, str],
) -> None:
    """For ARM-template launch configs: each template spec version the launch configs name,
    published at its id and holding `template` (the real specs' text is not public: their
    shape is); each gallery image registered; each subnet made in its virtual network, in the
    deployment's own subscriptions; and the provider's resource group, as an operator made it."""
    from tests.fixtures.sim_arm import AZURE_SUBNET_ID, make_subnet

    subscription, group = provider_group
    sim.deployments.create_resource_group(subscription, group, _arm_location(launch_configs[0]))
    for launch_config in launch_configs:
        arm = launch_config["armDeployment"]
        where = _arm_location(launch_config)
        sim.deployments.put_template_spec(arm["templateLink"]["id"], template, where)
        parameters = arm["parameters"]
        sim.register_image(parameters["imageId"]["value"], where)
        subnet = AZURE_SUBNET_ID.fullmatch(parameters["subnetId"]["value"])
        assert subnet is not None, parameters["subnetId"]
        sim.deployments.create_resource_group(subnet["subscription"], subnet["group"], where)
        make_subnet(sim, parameters["subnetId"]["value"], where)


def _arm_location(launch_config: Mapping[str, Any]) -> str:
    return str(launch_config["armDeployment"]["parameters"]["location"]["value"])
