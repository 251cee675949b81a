"""Worker pool definitions: what Taskcluster's schemas accept loads, what they refuse is refused
with the offending key's path, and the verdicts are checked against the published schemas."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from wm.kinds.azure import ARM_INJECTED_PARAMETERS
from wm.pools.definition import (
    NULL_PROVIDER,
    DefinitionInvalid,
    UnknownProvider,
    derive_launch_config_id,
    jsonb_text,
    parse_definition_documents,
    parse_pool_definition,
)
from wm.pools.json_check import is_date_time, is_email

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROVIDERS = {"aws": "aws", "gcp": "gcp", "azure": "azure", "static": "static"}
POOL = "proj/pool"
TEMPLATE_SPEC = (
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/templateSpecs/w/versions/1"
)


# ---- definitions to vary ------------------------------------------------------------------


def aws_lc(**extra: Any) -> dict:
    return {"region": "us-west-2", "launchConfig": {"ImageId": "ami-1"}, **extra}


def gcp_lc(**extra: Any) -> dict:
    return {
        "workerConfig": {},
        "region": "us-east1",
        "zone": "us-east1-a",
        "machineType": "n1-standard-2",
        "disks": [],
        "networkInterfaces": [],
        "scheduling": {},
        **extra,
    }


def azure_lc(**extra: Any) -> dict:
    return {
        "workerConfig": {},
        "location": "westus",
        "subnetId": "/subscriptions/s/subnets/default",
        "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
        "storageProfile": {"osDisk": {"createOption": "FromImage"}},
        **extra,
    }


def arm_lc(**deployment: Any) -> dict:
    return {
        "workerConfig": {},
        "armDeployment": {
            "mode": "Incremental",
            "templateLink": {"id": TEMPLATE_SPEC},
            "parameters": {"location": {"value": "eastus"}},
            **deployment,
        },
    }


def config(*launch_configs: dict, **extra: Any) -> dict:
    return {"minCapacity": 0, "maxCapacity": 4, "launchConfigs": list(launch_configs), **extra}


def body(provider: str, pool_config: Any, **extra: Any) -> dict:
    return {
        "providerId": provider,
        "description": "a pool",
        "owner": "owner@example.com",
        "emailOnError": False,
        "config": pool_config,
        **extra,
    }


def aws(*launch_configs: dict, **extra: Any) -> dict:
    return body("aws", config(*(launch_configs or (aws_lc(),)), **extra))


def gcp(*launch_configs: dict, **extra: Any) -> dict:
    return body("gcp", config(*(launch_configs or (gcp_lc(),)), **extra))


def azure(*launch_configs: dict, **extra: Any) -> dict:
    return body("azure", config(*(launch_configs or (azure_lc(),)), **extra))


def edit(value: dict, path: str, new: Any = ..., *, drop: bool = False) -> dict:
    """A copy of `value` with the dotted `path` set to `new` (or removed)."""
    result = copy.deepcopy(value)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target = result
    for part in parents:
        target = target[part]
    if drop:
        del target[last]
    else:
        target[last] = new
    return result


def parse(definition: Any, pool: str = POOL, **kw: Any):
    return parse_pool_definition(pool, definition, PROVIDERS, **kw)


def problems_of(definition: Any, pool: str = POOL, **kw: Any) -> tuple[str, ...]:
    with pytest.raises(DefinitionInvalid) as refused:
        parse(definition, pool, **kw)
    return refused.value.problems


# ---- Taskcluster's own verdict: the published schemas, ajv's formats ----------------------

SCHEMA_FILES = FIXTURES / "tc_schemas"
CONFIG_SCHEMA = {
    "aws": "config-aws",
    "gcp": "config-google",
    "azure": "config-azure",
    "static": "config-static",
    NULL_PROVIDER: "config-null",
}
# ajv-formats 2.1.1 "full" email, verbatim (JavaScript's `$` is Python's `\Z`).
AJV_EMAIL = re.compile(
    r"^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\Z",
    re.I | re.ASCII,
)


def _ajv_formats() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("email")(lambda s: not isinstance(s, str) or bool(AJV_EMAIL.match(s)))
    checker.checks("date-time")(lambda s: not isinstance(s, str) or is_date_time(s))
    return checker


def _registry() -> Registry:
    schemas = [json.loads(path.read_text()) for path in SCHEMA_FILES.glob("*.json")]
    resources = [(s["$id"].rstrip("#"), Resource(s, specification=DRAFT7)) for s in schemas]
    return Registry().with_resources(resources)


REGISTRY = _registry()
FORMATS = _ajv_formats()


def tc_errors(name: str, value: Any) -> list[str]:
    schema = json.loads((SCHEMA_FILES / f"{name}.json").read_text())
    validator = jsonschema.Draft7Validator(schema, registry=REGISTRY, format_checker=FORMATS)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)
    ]


def tc_schema_verdict(definition: Any, *, update: bool = False) -> list[str]:
    """What worker-manager's validator says: the request schema, then the provider's config
    schema (null-provider's for unknown providers, which the API refuses by other means)."""
    errors = tc_errors(
        "update-worker-pool-request" if update else "create-worker-pool-request", definition
    )
    if errors:
        return errors
    kind = PROVIDERS.get(definition["providerId"], NULL_PROVIDER)
    return tc_errors(CONFIG_SCHEMA[kind], definition["config"])


# ---- the table of refusals ------------------------------------------------------------------


class Refusal(NamedTuple):
    name: str
    definition: Any
    path: str  # the problem that must be reported starts with "<path>:"
    # Who refuses it in Taskcluster: its schemas, or the API / database after them.
    by: str = "schema"
    pool: str = POOL


LONG_ID = "x" * 39
REFUSALS = [
    # common fields
    Refusal("no owner", edit(aws(), "owner", drop=True), "owner"),
    Refusal("owner not an email", edit(aws(), "owner", "the build team"), "owner"),
    Refusal("owner with a space", edit(aws(), "owner", "a b@example.com"), "owner"),
    Refusal("emailOnError a string", edit(aws(), "emailOnError", "yes"), "emailOnError"),
    Refusal("description too long", edit(aws(), "description", "d" * 10241), "description"),
    Refusal("description a number", edit(aws(), "description", 7), "description"),
    Refusal("unknown top-level key", edit(aws(), "workerPoolId", POOL), "workerPoolId"),
    Refusal("providerId with a space", edit(aws(), "providerId", "my aws"), "providerId"),
    Refusal("providerId too long", edit(aws(), "providerId", LONG_ID), "providerId"),
    Refusal("no config", edit(aws(), "config", drop=True), "config"),
    Refusal("config a list", edit(aws(), "config", []), "config"),
    Refusal("no minCapacity", edit(aws(), "config.minCapacity", drop=True), "config.minCapacity"),
    Refusal("no maxCapacity", edit(gcp(), "config.maxCapacity", drop=True), "config.maxCapacity"),
    Refusal("negative minCapacity", edit(aws(), "config.minCapacity", -1), "config.minCapacity"),
    Refusal("fractional maxCapacity", edit(aws(), "config.maxCapacity", 1.5), "config.maxCapacity"),
    Refusal("boolean maxCapacity", edit(aws(), "config.maxCapacity", True), "config.maxCapacity"),
    Refusal("scalingRatio above 1", aws(scalingRatio=1.5), "config.scalingRatio"),
    Refusal("scalingRatio below 0", azure(scalingRatio=-0.1), "config.scalingRatio"),
    Refusal(
        "no launchConfigs", edit(aws(), "config.launchConfigs", drop=True), "config.launchConfigs"
    ),
    Refusal(
        "launchConfigs an object", edit(gcp(), "config.launchConfigs", {}), "config.launchConfigs"
    ),
    Refusal("repeated launch config", aws(aws_lc(), aws_lc()), "config.launchConfigs[1]"),
    Refusal(
        "queueInactivityTimeout below 1200",
        aws(lifecycle={"queueInactivityTimeout": 2}),
        "config.lifecycle.queueInactivityTimeout",
    ),
    Refusal(
        "reregistrationTimeout above 30 days",
        gcp(lifecycle={"reregistrationTimeout": 2592001}),
        "config.lifecycle.reregistrationTimeout",
    ),
    Refusal(
        "registrationTimeout a string",
        azure(lifecycle={"registrationTimeout": "1h"}),
        "config.lifecycle.registrationTimeout",
    ),
    Refusal("unknown lifecycle key", aws(lifecycle={"timeout": 5}), "config.lifecycle.timeout"),
    Refusal("unknown config key", aws(workerConfig={}), "config.workerConfig"),
    # workerManager, on every cloud
    Refusal(
        "launchConfigId with a space",
        aws(aws_lc(workerManager={"launchConfigId": "my config"})),
        "config.launchConfigs[0].workerManager.launchConfigId",
    ),
    Refusal(
        "launchConfigId of 39 characters",
        gcp(gcp_lc(workerManager={"launchConfigId": LONG_ID})),
        "config.launchConfigs[0].workerManager.launchConfigId",
    ),
    Refusal(
        "empty launchConfigId",
        azure(azure_lc(workerManager={"launchConfigId": ""})),
        "config.launchConfigs[0].workerManager.launchConfigId",
    ),
    Refusal(
        "capacityPerInstance 0",
        aws(aws_lc(workerManager={"capacityPerInstance": 0})),
        "config.launchConfigs[0].workerManager.capacityPerInstance",
    ),
    Refusal(
        "deprecated capacityPerInstance 0",
        gcp(gcp_lc(capacityPerInstance=0)),
        "config.launchConfigs[0].capacityPerInstance",
    ),
    Refusal(
        "initialWeight above 1",
        gcp(gcp_lc(workerManager={"initialWeight": 2})),
        "config.launchConfigs[0].workerManager.initialWeight",
    ),
    Refusal(
        "launch config maxCapacity negative",
        azure(azure_lc(workerManager={"maxCapacity": -1})),
        "config.launchConfigs[0].workerManager.maxCapacity",
    ),
    Refusal(
        "unknown workerManager key",
        aws(aws_lc(workerManager={"weight": 0.5})),
        "config.launchConfigs[0].workerManager.weight",
    ),
    Refusal(
        "publicIp outside Azure",
        gcp(gcp_lc(workerManager={"publicIp": True})),
        "config.launchConfigs[0].workerManager.publicIp",
    ),
    # AWS
    Refusal(
        "no ImageId",
        aws(aws_lc(), aws_lc(launchConfig={"InstanceType": "m5.large"})),
        "config.launchConfigs[1].launchConfig.ImageId",
    ),
    Refusal(
        "ImageId a number",
        aws(aws_lc(launchConfig={"ImageId": 5})),
        "config.launchConfigs[0].launchConfig.ImageId",
    ),
    Refusal(
        "no region", aws(edit(aws_lc(), "region", drop=True)), "config.launchConfigs[0].region"
    ),
    Refusal(
        "no launchConfig", aws({"region": "us-east-1"}), "config.launchConfigs[0].launchConfig"
    ),
    Refusal(
        "RunInstances key beside launchConfig",
        aws(aws_lc(InstanceType="m5.large")),
        "config.launchConfigs[0].InstanceType",
    ),
    Refusal(
        "all four of IamInstanceProfile, UserData, MinCount, MaxCount",
        aws(
            aws_lc(
                launchConfig={
                    "ImageId": "ami-1",
                    "IamInstanceProfile": {"Name": "admin"},
                    "UserData": "e30=",
                    "MinCount": 1,
                    "MaxCount": 1,
                }
            )
        ),
        "config.launchConfigs[0].launchConfig",
    ),
    Refusal(
        "additionalUserData.rootUrl",
        aws(aws_lc(additionalUserData={"rootUrl": "https://elsewhere"})),
        "config.launchConfigs[0].additionalUserData.rootUrl",
    ),
    Refusal(
        "additionalUserData.workerConfig",
        aws(aws_lc(additionalUserData={"workerConfig": {}})),
        "config.launchConfigs[0].additionalUserData.workerConfig",
    ),
    Refusal(
        "workerConfig a string",
        aws(aws_lc(workerConfig="{}")),
        "config.launchConfigs[0].workerConfig",
    ),
    # Google
    Refusal(
        "no workerConfig",
        gcp(edit(gcp_lc(), "workerConfig", drop=True)),
        "config.launchConfigs[0].workerConfig",
    ),
    Refusal("no zone", gcp(edit(gcp_lc(), "zone", drop=True)), "config.launchConfigs[0].zone"),
    Refusal(
        "no machineType",
        gcp(edit(gcp_lc(), "machineType", drop=True)),
        "config.launchConfigs[0].machineType",
    ),
    Refusal("disks an object", gcp(gcp_lc(disks={})), "config.launchConfigs[0].disks"),
    Refusal(
        "networkInterfaces missing",
        gcp(edit(gcp_lc(), "networkInterfaces", drop=True)),
        "config.launchConfigs[0].networkInterfaces",
    ),
    Refusal("scheduling a list", gcp(gcp_lc(scheduling=[])), "config.launchConfigs[0].scheduling"),
    Refusal("region a number", gcp(gcp_lc(region=1)), "config.launchConfigs[0].region"),
    # Azure, resource form
    Refusal(
        "Azure without workerConfig",
        azure(edit(azure_lc(), "workerConfig", drop=True)),
        "config.launchConfigs[0].workerConfig",
    ),
    Refusal(
        "no subnetId",
        azure(edit(azure_lc(), "subnetId", drop=True)),
        "config.launchConfigs[0].subnetId",
    ),
    Refusal(
        "no vmSize",
        azure(azure_lc(hardwareProfile={})),
        "config.launchConfigs[0].hardwareProfile.vmSize",
    ),
    Refusal(
        "no osDisk",
        azure(azure_lc(storageProfile={"imageReference": {"id": "img"}})),
        "config.launchConfigs[0].storageProfile.osDisk",
    ),
    Refusal(
        "imageReference id a number",
        azure(azure_lc(storageProfile={"osDisk": {}, "imageReference": {"id": 5}})),
        "config.launchConfigs[0].storageProfile.imageReference.id",
    ),
    Refusal(
        "maxPrice a string",
        azure(azure_lc(priority="Spot", billingProfile={"maxPrice": "cheap"})),
        "config.launchConfigs[0].billingProfile.maxPrice",
    ),
    Refusal(
        "networkProfile without networkInterfaces",
        azure(azure_lc(networkProfile={})),
        "config.launchConfigs[0].networkProfile.networkInterfaces",
    ),
    Refusal(
        "publicIp a string",
        azure(azure_lc(workerManager={"publicIp": "yes"})),
        "config.launchConfigs[0].workerManager.publicIp",
    ),
    Refusal(
        "keepDeployment a number",
        azure(arm_lc() | {"workerManager": {"keepDeployment": 1}}),
        "config.launchConfigs[0].workerManager.keepDeployment",
    ),
    Refusal(
        "ignoreFailedProvisioningStates repeated",
        azure(azure_lc(workerManager={"ignoreFailedProvisioningStates": ["A", "A"]})),
        "config.launchConfigs[0].workerManager.ignoreFailedProvisioningStates[1]",
    ),
    Refusal(
        "deprecated ignoreFailedProvisioningStates not strings",
        azure(azure_lc(ignoreFailedProvisioningStates=[1])),
        "config.launchConfigs[0].ignoreFailedProvisioningStates[0]",
    ),
    # Azure, ARM templates
    Refusal(
        "resource form and armDeployment at once",
        azure(azure_lc() | arm_lc()),
        "config.launchConfigs[0]",
    ),
    Refusal(
        "armDeployment without mode",
        azure(edit(arm_lc(), "armDeployment.mode", drop=True)),
        "config.launchConfigs[0].armDeployment.mode",
    ),
    Refusal(
        "armDeployment mode unknown",
        azure(arm_lc(mode="Sideways")),
        "config.launchConfigs[0].armDeployment.mode",
    ),
    Refusal(
        "template and templateLink",
        azure(arm_lc(template={"resources": []})),
        "config.launchConfigs[0].armDeployment",
    ),
    Refusal(
        "neither template nor templateLink",
        azure(edit(arm_lc(), "armDeployment.templateLink", drop=True)),
        "config.launchConfigs[0].armDeployment",
    ),
    Refusal(
        "templateLink id not a template spec",
        azure(arm_lc(templateLink={"id": "/subscriptions/s/templates/w"})),
        "config.launchConfigs[0].armDeployment.templateLink.id",
    ),
    Refusal(
        "templateLink with id and uri",
        azure(arm_lc(templateLink={"id": TEMPLATE_SPEC, "uri": "https://t"})),
        "config.launchConfigs[0].armDeployment.templateLink.uri",
    ),
    Refusal(
        "parameters without location",
        azure(arm_lc(parameters={"vmSize": {"value": "Standard_F16s_v2"}})),
        "config.launchConfigs[0].armDeployment.parameters.location",
    ),
    Refusal(
        "parameter without value",
        azure(arm_lc(parameters={"location": {"value": "eastus"}, "vmSize": "F16"})),
        "config.launchConfigs[0].armDeployment.parameters.vmSize",
    ),
    Refusal(
        "KeyVault reference without secretName",
        azure(
            arm_lc(
                parameters={
                    "location": {"value": "eastus"},
                    "adminPassword": {"reference": {"keyVault": {"id": "kv"}}},
                }
            )
        ),
        "config.launchConfigs[0].armDeployment.parameters.adminPassword.reference.secretName",
    ),
    Refusal(
        "unknown armDeployment key",
        azure(arm_lc(location="eastus")),
        "config.launchConfigs[0].armDeployment.location",
    ),
    Refusal(
        "debugSetting detailLevel unknown",
        azure(arm_lc(debugSetting={"detailLevel": "everything"})),
        "config.launchConfigs[0].armDeployment.debugSetting.detailLevel",
    ),
    # refused by worker-manager after its schemas
    Refusal("unknown provider", body("google", config()), "providerId", by="api"),
    Refusal("malformed pool id", aws(), "workerPoolId", by="api", pool="Proj/Pool"),
    Refusal(
        "one launchConfigId for two configurations",
        aws(
            aws_lc(workerManager={"launchConfigId": "lc1"}),
            aws_lc(region="us-east-1", workerManager={"launchConfigId": "lc1"}),
        ),
        "config.launchConfigs[1].workerManager.launchConfigId",
        by="db",
    ),
]


def test_the_refusal_table_covers_every_cloud():
    assert len(REFUSALS) >= 25
    providers = {case.definition["providerId"] for case in REFUSALS}
    assert {"aws", "gcp", "azure"} <= providers


@pytest.mark.parametrize("case", REFUSALS, ids=[c.name for c in REFUSALS])
def test_a_definition_the_schemas_refuse_is_refused_with_its_key_path(case: Refusal):
    problems = problems_of(case.definition, case.pool)
    assert any(p.startswith(f"{case.path}: ") for p in problems), problems


@pytest.mark.parametrize("case", REFUSALS, ids=[c.name for c in REFUSALS])
def test_taskclusters_schemas_give_the_same_verdict_on_each_refusal(case: Refusal):
    errors = tc_schema_verdict(case.definition)
    if case.by == "schema":
        assert errors, "Taskcluster's schemas accept it"
    else:  # the API (provider, path parameter) or the database (launch config ids) refuses it
        assert errors == []


# ---- the table of acceptances ---------------------------------------------------------------


class Accepted(NamedTuple):
    name: str
    definition: Any
    update: bool = False


def fixture_body(name: str, provider: str) -> dict:
    data = json.loads((FIXTURES / "tc_pools" / name).read_text())
    return body(provider, data.get("config", data))


ACCEPTED = [
    Accepted("Taskcluster's AWS sample", fixture_body("sample-aws-config.json", "aws")),
    Accepted("Taskcluster's Google sample", fixture_body("sample-google-config.json", "gcp")),
    Accepted("Taskcluster's Azure sample", fixture_body("sample-azure-config.json", "azure")),
    Accepted(
        "Taskcluster's Azure ARM sample", fixture_body("sample-azure-arm-config.json", "azure")
    ),
    Accepted("AWS provider test pool", fixture_body("provider-aws-test.json", "aws")),
    Accepted("Google provider test pool", fixture_body("provider-google-test.json", "gcp")),
    Accepted(
        "API test body",
        json.loads((FIXTURES / "tc_pools" / "api-test-update-launch-configs.json").read_text()),
    ),
    Accepted("no launch configs", body("aws", config())),
    # community-tc's gw-ci-freebsd, as its generator writes it (worker-manager's config-static)
    Accepted(
        "a static pool",
        body(
            "static",
            {
                "lifecycle": {"reregistrationTimeout": 86400},
                "workerConfig": {"genericWorker": {"config": {"osGroups": ["admin"]}}},
            },
        ),
    ),
    Accepted("a static pool with an empty config", body("static", {})),
    Accepted("minCapacity above maxCapacity", body("aws", config(aws_lc(), minCapacity=9))),
    Accepted("integers written as 2.0", edit(aws(), "config.maxCapacity", 2.0)),
    Accepted("scalingRatio 0", gcp(scalingRatio=0)),
    Accepted(
        "every lifecycle field",
        azure(
            lifecycle={
                "registrationTimeout": 1800,
                "reregistrationTimeout": 2592000,
                "queueInactivityTimeout": 1200,
            }
        ),
    ),
    Accepted("negative registrationTimeout", aws(lifecycle={"registrationTimeout": -5})),
    Accepted(
        "every workerManager field",
        aws(
            aws_lc(
                workerManager={
                    "launchConfigId": "lc_A-1",
                    "capacityPerInstance": 4,
                    "initialWeight": 0,
                    "maxCapacity": 0,
                }
            )
        ),
    ),
    Accepted(
        "RunInstances parameters passed through",
        aws(
            aws_lc(
                launchConfig={
                    "ImageId": "ami-1",
                    "InstanceType": "m5.large",
                    "SubnetId": "subnet-1",
                    "SecurityGroupIds": ["sg-1"],
                    "IamInstanceProfile": {"Arn": "arn:aws:iam::1:instance-profile/w"},
                    "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 60}}],
                    "InstanceMarketOptions": {"MarketType": "spot"},
                    "TagSpecifications": [{"ResourceType": "instance", "Tags": []}],
                },
                additionalUserData={"launchConfigId": "mine", "extra": 1},
                workerConfig={"genericWorker": {"config": {}}},
                capacityPerInstance=2,
            )
        ),
    ),
    Accepted(
        "three of the four keys the schema forbids together",
        aws(
            aws_lc(launchConfig={"ImageId": "a", "UserData": "e30=", "MinCount": 1, "MaxCount": 2})
        ),
    ),
    Accepted(
        "launch configs differing only in workerManager",
        aws(
            aws_lc(workerManager={"initialWeight": 0.5}), aws_lc(workerManager={"initialWeight": 1})
        ),
    ),
    Accepted(
        "GCE body passed through",
        gcp(
            gcp_lc(
                guestAccelerators=[{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}],
                scheduling={"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"},
                labels={"team": "ci"},
                metadata={"items": [{"key": "k", "value": "v"}]},
                disks=[{"boot": True, "initializeParams": {"diskSizeGb": 50}}],
            )
        ),
    ),
    Accepted(
        "Azure spot VM with its own NIC list and tags",
        azure(
            azure_lc(
                priority="Spot",
                evictionPolicy="Delete",
                billingProfile={"maxPrice": -1},
                osProfile={"adminUsername": "tc"},
                networkProfile={"networkInterfaces": [{"id": "nic", "primary": True}]},
                storageProfile={"osDisk": {}, "dataDisks": [{"diskSizeGB": 100}]},
                tags={"team": "ci"},
                workerManager={"publicIp": True, "ignoreFailedProvisioningStates": ["A"]},
            )
        ),
    ),
    Accepted(
        "ARM with an inline template and a KeyVault secret",
        azure(
            edit(
                arm_lc(
                    template={
                        "parameters": {
                            name: {"type": "string"}
                            for name in ("location", *ARM_INJECTED_PARAMETERS)
                        },
                        "resources": [],
                    },
                    parameters={
                        "location": {"value": "eastus"},
                        "adminPassword": {
                            "reference": {"keyVault": {"id": "kv"}, "secretName": "pw"}
                        },
                    },
                    debugSetting={"detailLevel": "requestContent,responseContent"},
                    onErrorDeployment={"type": "LastSuccessful"},
                    expressionEvaluationOptions={"scope": "Inner"},
                ),
                "armDeployment.templateLink",
                drop=True,
            )
            | {"armDeploymentResourceGroup": "rg-workers"}
        ),
    ),
    Accepted(
        "ARM with a template uri",
        azure(arm_lc(templateLink={"uri": "https://t/w.json", "contentVersion": "1.0.0.0"})),
    ),
    Accepted(
        "resource form with a broken armDeployment matches one form only",
        azure(azure_lc(armDeployment={"mode": "Sideways"})),
    ),
    Accepted("null-provider with any config", body(NULL_PROVIDER, {"anything": [1, "x"]})),
    Accepted("owner with plus and subdomain", edit(aws(), "owner", "ci+wm@mail.example.co.uk")),
    Accepted(
        "update body holding its pool id and times",
        aws()
        | {
            "workerPoolId": POOL,
            "created": "2019-10-18T21:16:41.593Z",
            "lastModified": "2019-10-18 21:16:41",
        },
        update=True,
    ),
]


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_a_definition_the_schemas_accept_loads(case: Accepted):
    assert tc_schema_verdict(case.definition, update=case.update) == []
    definition = parse(case.definition, update=case.update)
    assert definition.worker_pool_id == POOL
    assert definition.config == case.definition["config"]


def test_taskclusters_azure_provider_test_pool_lacks_workerconfig_and_is_refused_by_both():
    # The provider tests write this pool to the database directly, past the schemas.
    refused = fixture_body("provider-azure-test.json", "azure")
    assert tc_schema_verdict(refused)
    assert "config.launchConfigs[0].workerConfig: required" in problems_of(refused)


def test_every_problem_is_reported_at_once():
    problems = problems_of(
        aws(
            aws_lc(launchConfig={}),
            scalingRatio=2,
            lifecycle={"queueInactivityTimeout": 60},
        )
        | {"owner": "nobody"}
    )
    assert [p.split(":")[0] for p in problems] == [
        "owner",
        "config.launchConfigs[0].launchConfig.ImageId",
        "config.scalingRatio",
        "config.lifecycle.queueInactivityTimeout",
    ]
    assert "config.lifecycle.queueInactivityTimeout: must be >= 1200" in problems
    assert "config.launchConfigs[0].launchConfig.ImageId: required" in problems


def test_unknown_provider_names_the_valid_ones():
    with pytest.raises(UnknownProvider) as refused:
        parse(body("google", config()))
    assert refused.value.valid_provider_ids == ("aws", "gcp", "azure", "static", NULL_PROVIDER)
    assert "aws, gcp, azure, static, null-provider" in refused.value.problems[0]


def test_an_update_body_must_name_its_own_pool():
    problems = problems_of(aws() | {"workerPoolId": "proj/other"}, update=True)
    assert any(p.startswith("workerPoolId: ") for p in problems)
    assert problems_of(aws() | {"created": "yesterday"}, update=True) == (
        "created: must be a date-time such as 2019-10-18T21:16:41.593Z",
    )


def test_a_bad_body_says_so_without_a_provider_lookup():
    assert problems_of(["not", "an", "object"]) == ("body: must be an object",)


# ---- what a definition reads as ---------------------------------------------------------------


def test_defaults_fill_what_a_definition_leaves_out():
    pool = parse(aws())
    assert (pool.min_capacity, pool.max_capacity, pool.scaling_ratio) == (0, 4, 1.0)
    assert pool.lifecycle.registration_timeout_s is None
    assert pool.lifecycle.reregistration_timeout_s == 345600
    assert pool.lifecycle.queue_inactivity_timeout_s == 7200
    assert pool.lifecycle.effective_registration_timeout_s == 345600
    (lc,) = pool.launch_configs
    assert (lc.capacity_per_instance, lc.initial_weight, lc.max_capacity) == (1, 1.0, None)
    assert lc.worker_config == {}
    assert (pool.description, pool.owner, pool.email_on_error) == (
        "a pool",
        "owner@example.com",
        False,
    )


def test_lifecycle_is_read_as_worker_manager_interprets_it():
    pool = parse(aws(lifecycle={"registrationTimeout": 900, "reregistrationTimeout": 0}))
    # interpretLifecycle's `||`: 0 means the default
    assert pool.lifecycle.reregistration_timeout_s == 345600
    assert pool.lifecycle.effective_registration_timeout_s == 900
    late = parse(aws(lifecycle={"registrationTimeout": 9000, "reregistrationTimeout": 3600}))
    assert late.lifecycle.effective_registration_timeout_s == 3600


def test_capacity_per_instance_prefers_workermanager_then_the_deprecated_key():
    pool = parse(
        aws(
            aws_lc(workerManager={"capacityPerInstance": 4}, capacityPerInstance=2),
            aws_lc(region="us-east-1", capacityPerInstance=2),
            aws_lc(region="eu-west-1"),
        )
    )
    assert [lc.capacity_per_instance for lc in pool.launch_configs] == [4, 2, 1]


def test_each_cloud_names_its_worker_group():
    assert parse(aws()).launch_configs[0].worker_group == "us-west-2"
    assert parse(gcp()).launch_configs[0].worker_group == "us-east1-a"
    resources, template = parse(azure(azure_lc(), arm_lc())).launch_configs
    assert (resources.worker_group, resources.arm_deployment) == ("westus", False)
    assert (template.worker_group, template.arm_deployment) == ("eastus", True)


def test_the_launch_config_body_is_verbatim_with_its_id_filled_in():
    given = aws_lc(workerManager={"initialWeight": 0.25, "maxCapacity": 3}, workerConfig={"a": 1})
    (lc,) = parse(aws(given)).launch_configs
    assert lc.launch_config_id == derive_launch_config_id(POOL, given)
    assert lc.body == given | {
        "workerManager": given["workerManager"] | {"launchConfigId": lc.launch_config_id}
    }
    assert (lc.initial_weight, lc.max_capacity, lc.worker_config) == (0.25, 3, {"a": 1})
    explicit = parse(aws(aws_lc(workerManager={"launchConfigId": "lc-mine"}))).launch_configs[0]
    assert explicit.launch_config_id == "lc-mine"
    assert explicit.body["workerManager"] == {"launchConfigId": "lc-mine"}


def test_aws_keys_wm_sets_load_with_a_warning():
    pool = parse(aws(aws_lc(launchConfig={"ImageId": "a", "UserData": "x", "ClientToken": "t"})))
    assert pool.warnings == (
        "config.launchConfigs[0].launchConfig.UserData: ignored: wm sets it",
        "config.launchConfigs[0].launchConfig.ClientToken: ignored: wm sets it",
    )


def test_launch_configs_differing_only_in_workermanager_merge_into_the_later_one():
    pool = parse(
        aws(
            aws_lc(workerManager={"initialWeight": 0.5}),
            aws_lc(workerManager={"initialWeight": 0.2}),
        )
    )
    (lc,) = pool.launch_configs
    assert lc.initial_weight == 0.2
    assert (
        "config.launchConfigs[1]: the launch config of config.launchConfigs[0]" in pool.warnings[0]
    )


def test_a_null_provider_pool_reads_what_it_can():
    pool = parse(
        body(
            NULL_PROVIDER,
            {"minCapacity": -3, "maxCapacity": 2, "launchConfigs": [aws_lc(), "junk"]},
        )
    )
    assert (pool.min_capacity, pool.max_capacity) == (0, 2)
    assert [lc.worker_group for lc in pool.launch_configs] == ["us-west-2"]
    assert pool.warnings == ("config.launchConfigs[1]: not an object; left out",)


def test_email_is_ajvs_email():
    samples = [
        "a@b.c",
        "a@b",
        "A.B+c@Example-Mail.co.uk",
        "a..b@c.d",
        ".a@c.d",
        "a@-b.c",
        "a@b-.c",
        "a@b--c.d",
        "a@b.c.",
        "ä@b.c",
        "a@b_c.d",
        "a@1.2",
        "a b@c.d",
        "a@b.c\n",
        "\u212a@b.c",  # Kelvin sign: JavaScript's /i does not fold it to k
        "",
    ]
    assert [is_email(s) for s in samples] == [bool(AJV_EMAIL.match(s)) for s in samples]


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("2019-10-18T21:16:41.593Z", True),
        ("2019-10-18t21:16:41+02:00", True),
        ("2019-10-18 21:16:41", True),  # ajv-formats 2.1.1 never enforces the zone
        ("2020-02-29T00:00:00Z", True),
        ("2019-02-29T00:00:00Z", False),
        ("2019-13-01T00:00:00Z", False),
        ("2019-10-18T24:00:00Z", False),
        ("2019-10-18T23:59:60Z", True),
        ("2019-10-18", False),
        ("yesterday", False),
    ],
)
def test_date_time_is_ajvs_date_time(text: str, valid: bool):
    assert is_date_time(text) is valid


# ---- launch config ids --------------------------------------------------------------------------


def test_jsonb_text_orders_keys_by_length_then_bytes_and_prints_numbers_as_numeric():
    value = {"bb": 1.0, "a": [True, None, 1.5e-7], "é": "x", "ab": {"z": 1e21, "y": -0.0}}
    assert jsonb_text(value) == (
        '{"a": [true, null, 0.00000015], "ab": {"y": 0, "z": 1000000000000000000000}, '
        '"bb": 1, "é": "x"}'
    )
    assert jsonb_text({"s": 'q"\\\n\t\x01\x7f😀'}) == '{"s": "q\\"\\\\\\n\\t\\u0001\x7f😀"}'
    assert jsonb_text([2**60, 0.1, 100, {}, []]) == "[1152921504606847000, 0.1, 100, {}, []]"


def test_derived_ids_ignore_workermanager_and_depend_on_the_pool():
    lc = aws_lc()
    same = derive_launch_config_id(POOL, lc | {"workerManager": {"initialWeight": 0.1}})
    assert derive_launch_config_id(POOL, lc) == same
    assert derive_launch_config_id("proj/other", lc) != same
    assert re.fullmatch(r"lc-[0-9a-f]{20}", same)


# ---- definition files ---------------------------------------------------------------------------


def document(pool: str = POOL, **extra: Any) -> dict:
    return {"workerPoolId": pool, **aws(), **extra}


def test_a_json_object_is_one_definition():
    (found,) = parse_definition_documents(json.dumps(document()), "pools.json")
    assert found == (POOL, aws())


def test_a_json_list_holds_many_and_a_missing_id_names_its_document_and_line():
    text = json.dumps([document("proj/a"), aws(), document("proj/c")], indent=2)
    with pytest.raises(DefinitionInvalid) as refused:
        parse_definition_documents(text, "pools.json")
    line = text.splitlines().index("  {", 2) + 1  # the second item's opening brace
    assert refused.value.problems == (
        f"pools.json: document 2 (line {line}): workerPoolId: required",
    )


def test_yaml_documents_and_lists_each_hold_definitions():
    text = (
        "workerPoolId: proj/a\nproviderId: aws\ndescription: a\nowner: a@example.com\n"
        "emailOnError: false\nconfig: {minCapacity: 0, maxCapacity: 1, launchConfigs: []}\n"
        "---\n"
        "- workerPoolId: proj/b\n  providerId: gcp\n  description: '2020-01-01'\n"
        "  owner: b@example.com\n  emailOnError: true\n  config: {created: 2020-01-01}\n"
        "- workerPoolId: proj/c\n  providerId: azure\n  config: {}\n"
        "---\n"
    )
    found = parse_definition_documents(text, "pools.yaml")
    assert [pool for pool, _ in found] == ["proj/a", "proj/b", "proj/c"]
    assert found[1][1]["config"] == {"created": "2020-01-01"}  # a date stays a string
    assert "workerPoolId" not in found[0][1]
    assert parse(found[0][1], "proj/a").max_capacity == 1


def test_broken_syntax_names_the_file_and_line():
    with pytest.raises(DefinitionInvalid) as json_refused:
        parse_definition_documents('{"workerPoolId": "proj/a",\n  "config": }', "a.json")
    assert json_refused.value.problems[0].startswith("a.json: JSON (line 2, column 13): ")
    with pytest.raises(DefinitionInvalid) as yaml_refused:
        parse_definition_documents("workerPoolId: a\n---\nconfig: [1, 2\nowner: x\n", "b.yml")
    assert yaml_refused.value.problems[0].startswith("b.yml: YAML (document 2, line ")


def test_what_json_cannot_hold_and_what_is_no_object_are_refused():
    text = "- workerPoolId: proj/a\n  config: !!set {a}\n  1: x\n- just text\n"
    with pytest.raises(DefinitionInvalid) as refused:
        parse_definition_documents(text, "c.yaml")
    assert refused.value.problems == (
        "c.yaml: document 1 (line 1): body: key 1 is not a string",
        "c.yaml: document 1 (line 1): config: set is not a JSON value",
        "c.yaml: document 2 (line 4): must be an object {workerPoolId, providerId, description, "
        "owner, emailOnError, config}",
    )


def test_a_pool_defined_twice_in_a_file_is_refused():
    text = json.dumps([document("proj/a"), document("proj/a")])
    with pytest.raises(DefinitionInvalid) as refused:
        parse_definition_documents(text, "d.json")
    assert refused.value.problems == (
        "d.json: document 2 (line 1): workerPoolId: proj/a is also defined by document 1",
    )


def test_an_empty_file_holds_no_definitions():
    assert parse_definition_documents("", "empty.yaml") == []
    assert parse_definition_documents("# nothing yet\n---\n", "empty.yaml") == []


# ---- many more verdicts: mutated definitions, compared with the published schemas ----------

MUTANTS = [
    "drop",
    "null",
    "text",
    "number",
    "fraction",
    "negative",
    "true",
    "object",
    "list",
    "extra key",
]


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _mutate(value: Any, path: tuple, how: str) -> Any:
    result = copy.deepcopy(value)
    *parents, last = path
    target = result
    for part in parents:
        target = target[part]
    new = {
        "null": None,
        "text": "x",
        "number": 7,
        "fraction": 0.5,
        "negative": -1,
        "true": True,
        "object": {},
        "list": [],
    }
    if how == "drop":
        del target[last]
    elif how == "extra key" and isinstance(target[last], dict):
        target[last]["zzUnknown"] = 1
    elif how in new:
        target[last] = new[how]
    return result


def _mutants() -> list[tuple[str, Any]]:
    found = []
    for case in ACCEPTED:
        if case.update:
            continue
        for path in _paths(case.definition):
            for how in MUTANTS:
                found.append(
                    (
                        f"{case.name}: {how} at {'/'.join(map(str, path))}",
                        _mutate(case.definition, path, how),
                    )
                )
    return found


def _undeclared_in_template(problem: str) -> bool:
    return ".armDeployment.template.parameters." in problem and "not declared" in problem


def test_mutated_definitions_get_taskclusters_verdict():
    disagreements = []
    for name, mutant in _mutants():
        errors = tc_schema_verdict(mutant) if isinstance(mutant.get("providerId"), str) else ["x"]
        try:
            parse(mutant)
            accepted = True
        except UnknownProvider:
            accepted = False
            errors = errors or []  # the API's refusal, after a schema that accepts
            if not errors:
                continue
        except DefinitionInvalid as refused:
            accepted = False
            if not errors and all("is also the id of" in p for p in refused.problems):
                continue  # the database's 409, after schemas that accept
            if not errors and all(_undeclared_in_template(p) for p in refused.problems):
                continue  # ARM's InvalidTemplate at every deployment, refused up front
        if accepted == bool(errors):
            disagreements.append(f"{name}: wm {'accepts' if accepted else 'refuses'}; {errors[:2]}")
    assert disagreements == []
    assert len(_mutants()) > 2000


def test_a_max_capacity_below_the_min_is_accepted_with_a_warning_naming_both():
    definition = parse(body("aws", config(aws_lc(), minCapacity=9, maxCapacity=2)))
    assert (definition.min_capacity, definition.max_capacity) == (9, 2)
    assert definition.warnings == (
        "config.maxCapacity (2) is below config.minCapacity (9): the pool keeps minCapacity "
        "(9) running anyway, as worker-manager does",
    )
    assert parse(body("aws", config(aws_lc(), minCapacity=2, maxCapacity=2))).warnings == ()
