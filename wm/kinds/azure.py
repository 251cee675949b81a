"""The azure provider kind: Azure VMs, one PUT each, or ARM template deployments (Taskcluster's
providerType `azure`; services/worker-manager/src/providers/azure/index.js, schemas/v1/
config-azure.yml, azure-deployment-resources.yml, azure-arm-templates.yml). Pure: no I/O, no
SDK."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from wm.calls import CallClass
from wm.config.base import BudgetLimit, ConfigPath, ProviderConfigBase, removed_setting
from wm.errors import ON_DEMAND, SPOT
from wm.kinds.base import MANAGED_BY, BootFacts, KindDescription
from wm.kinds.schema_parts import (
    BOOLEAN,
    INTEGER_MIN_1,
    OBJECT,
    STRING,
    UNIQUE_STRINGS,
    closed,
    holds,
    worker_manager,
)
from wm.model import Offering
from wm.pools.json_check import Schema, check, js_truthy

# Azure's published defaults, per subscription. Resource Manager's buckets ("Understand how
# Azure Resource Manager throttles requests": writes, deletes and reads per principal and
# subscription), and Compute's own policies for VMs on top ("Compute throttling limits", the
# subscription-level bucket of each: a capacity and a refill a minute, here a second).
PUBLISHED_BUDGETS: Mapping[CallClass, BudgetLimit] = {
    CallClass.WRITE: BudgetLimit(burst=200, per_s=10),
    CallClass.DELETE: BudgetLimit(burst=200, per_s=10),
    CallClass.READ: BudgetLimit(burst=250, per_s=25),
    CallClass.PUT_VM: BudgetLimit(burst=1500, per_s=500 / 60),
    CallClass.DELETE_VM: BudgetLimit(burst=1500, per_s=500 / 60),
    CallClass.GET_VM: BudgetLimit(burst=24000, per_s=8000 / 60),
    CallClass.LIST_VMS: BudgetLimit(burst=900, per_s=300 / 60),
}
CREATE_BATCH_MAX = 100  # VM PUTs (or deployments) sent together, each its own call
TEMPLATE_SPEC_ID_PATTERN = (
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Resources"
    r"/templateSpecs/[^/]+/versions/[^/]+"
)
# The template parameters worker-manager sets in every ARM deployment, over the launch
# config's own values (azure/index.js `#provisionARMTemplateWorker`): a template that does not
# declare one is refused by ARM (400 InvalidTemplate), so an inline template is checked here.
ARM_INJECTED_PARAMETERS = (
    "tags",
    "vmName",
    "computerName",
    "adminUsername",
    "adminPassword",
    "customData",
)


class AzureProviderConfig(ProviderConfigBase):
    published_budgets: ClassVar[Mapping[CallClass, BudgetLimit]] = PUBLISHED_BUDGETS

    kind: Literal["azure"]
    subscription_id: Annotated[str, Field(min_length=1)]
    resource_group: Annotated[str, Field(min_length=1)]  # holds this deployment's VMs
    ca_bundle: ConfigPath | None = None  # PEM file to trust (the simulated cloud's certificate)
    authority: str | None = None  # Entra ID authority host; the endpoint when simulated
    # PEM files adding to the Microsoft roots and intermediates wm ships for attested data:
    # self-signed certificates become trusted roots, the others intermediates (a private CA, the
    # simulated ARM). Empty for real Azure.
    identity_roots: tuple[ConfigPath, ...] = ()

    _no_subnet_id = removed_setting(
        "subnet_id",
        "each launch config names its subnet, as Taskcluster's do; move the value into the "
        "launch configs' `subnetId` and remove the key",
    )


RESOURCES: Schema = {
    "type": "object",  # and anything else of the VM body
    "required": ["location", "subnetId", "hardwareProfile", "storageProfile"],
    "properties": {
        "ignoreFailedProvisioningStates": UNIQUE_STRINGS,  # deprecated: workerManager's
        "location": STRING,
        "subnetId": STRING,
        "priority": STRING,
        "billingProfile": {"type": "object", "properties": {"maxPrice": {"type": "number"}}},
        "hardwareProfile": {
            "type": "object",
            "required": ["vmSize"],
            "properties": {"vmSize": STRING},
        },
        "osProfile": OBJECT,
        "storageProfile": {
            "type": "object",
            "required": ["osDisk"],
            "properties": {
                "osDisk": {"type": "object", "properties": {"createOption": STRING}},
                "dataDisks": {"type": "array", "items": OBJECT},
                "imageReference": {"type": "object", "properties": {"id": STRING}},
            },
        },
        "networkProfile": {
            "type": "object",
            "required": ["networkInterfaces"],
            "properties": {
                "networkInterfaces": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"id": STRING, "primary": BOOLEAN}},
                },
            },
        },
    },
}

_ARM_PARAMETER: Schema = {
    "type": "object",
    "oneOf": [
        closed({"value": {}}, required=["value"]),
        closed(
            {
                "reference": closed(
                    {
                        "keyVault": closed({"id": STRING}),
                        "secretName": STRING,
                        "secretVersion": STRING,
                    },
                    required=["keyVault", "secretName"],
                )
            },
            required=["reference"],
        ),
    ],
    "pick": lambda v: 1 if holds("reference", without="value")(v) else 0,
}

_TEMPLATE_LINK: Schema = {
    "oneOf": [
        closed(
            {
                "id": {
                    "type": "string",
                    "pattern": TEMPLATE_SPEC_ID_PATTERN,
                    "hint": "must be a template spec version's resource id (/subscriptions/…"
                    "/providers/Microsoft.Resources/templateSpecs/…/versions/…)",
                }
            },
            required=["id"],
        ),
        closed(
            {"uri": STRING, "contentVersion": STRING, "queryString": STRING},
            required=["uri"],
        ),
    ],
    "pick": lambda v: 1 if holds("uri", without="id")(v) else 0,
}

_ARM_DEPLOYMENT: Schema = closed(
    {
        "mode": {"type": "string", "enum": ["Incremental", "Complete"]},
        "template": OBJECT,
        "templateLink": _TEMPLATE_LINK,
        "parameters": {
            "type": "object",
            "required": ["location"],
            "additionalProperties": _ARM_PARAMETER,
        },
        "parametersLink": closed({"uri": STRING, "contentVersion": STRING}),
        "debugSetting": closed(
            {
                "detailLevel": {
                    "type": "string",
                    "enum": ["requestContent", "responseContent", "requestContent,responseContent"],
                }
            }
        ),
        "onErrorDeployment": closed(
            {
                "type": {"type": "string", "enum": ["LastSuccessful", "SpecificDeployment"]},
                "deploymentName": STRING,
            }
        ),
        "expressionEvaluationOptions": closed(
            {"scope": {"type": "string", "enum": ["Inner", "Outer"]}}
        ),
    },
    required=["mode"],
    oneOf=[{"required": ["template"]}, {"required": ["templateLink"]}],
    none="needs template or templateLink",
    both="takes template or templateLink, not both",
)

ARM: Schema = {
    "type": "object",
    "required": ["armDeployment"],
    "properties": {"armDeploymentResourceGroup": STRING, "armDeployment": _ARM_DEPLOYMENT},
}

LAUNCH_CONFIG: Schema = {
    "allOf": [
        {
            "type": "object",
            "required": ["workerConfig"],
            "properties": {
                "capacityPerInstance": INTEGER_MIN_1,
                "workerManager": worker_manager(
                    publicIp=BOOLEAN,
                    ignoreFailedProvisioningStates=UNIQUE_STRINGS,
                    keepDeployment=BOOLEAN,
                ),
                "workerConfig": OBJECT,
                "tags": OBJECT,
            },
        },
        {
            "oneOf": [RESOURCES, ARM],
            "pick": lambda v: 1 if holds("armDeployment")(v) else 0,
            "both": "uses both the resource form (location, subnetId, hardwareProfile, "
            "storageProfile) and armDeployment; use one",
        },
    ]
}


def arm_location(launch_config: Mapping[str, Any]) -> Any:
    """The ARM form's `armDeployment.parameters.location.value`, when there is one."""
    deployment = launch_config.get("armDeployment")
    parameters = deployment.get("parameters") if isinstance(deployment, Mapping) else None
    location = parameters.get("location") if isinstance(parameters, Mapping) else None
    return location.get("value") if isinstance(location, Mapping) else None


def worker_group(launch_config: Mapping[str, Any]) -> Any:
    """The location (resource form) or the ARM deployment's `location` parameter value."""
    if not check(launch_config, RESOURCES):
        return launch_config.get("location")
    return arm_location(launch_config)


def worker_group_guesses(launch_config: Mapping[str, Any]) -> tuple[Any, ...]:
    return (launch_config.get("location"), arm_location(launch_config))


def template_form(launch_config: Mapping[str, Any]) -> bool:
    """worker-manager's Azure provider takes the ARM path whenever armDeployment is truthy."""
    return js_truthy(launch_config.get("armDeployment"))


# Azure's spot priorities (ARM matches enums without regard to case); "Low" is the older
# low-priority VM, sold and evicted as spot.
SPOT_PRIORITIES = frozenset({"spot", "low"})


def offering(launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
    """The worker group is the location. The resource form: hardwareProfile.vmSize, priority,
    and the zone when `zones` names exactly one (none or several: Azure picks). The ARM form:
    the deployment's `vmSize` and `priority` parameter values, no zone (what the template does
    with its parameters only the template says). A missing priority is Azure's default,
    Regular (on demand), as wm.providers.azure.errors.error_scope reads it, so a refusal's
    scope and the offering agree; a template that hard-codes Spot without a `priority`
    parameter is on demand to wm. None without a string VM size."""
    if template_form(launch_config):
        deployment = launch_config.get("armDeployment")
        parameters = deployment.get("parameters") if isinstance(deployment, Mapping) else None
        parameters = parameters if isinstance(parameters, Mapping) else {}

        def value(name: str) -> Any:
            parameter = parameters.get(name)
            return parameter.get("value") if isinstance(parameter, Mapping) else None

        size, priority, zones = value("vmSize"), value("priority"), None
    else:
        hardware = launch_config.get("hardwareProfile")
        size = hardware.get("vmSize") if isinstance(hardware, Mapping) else None
        priority, zones = launch_config.get("priority"), launch_config.get("zones")
    if not isinstance(size, str) or not size:
        return None
    zone = zones[0] if isinstance(zones, list) and len(zones) == 1 else None
    spot = isinstance(priority, str) and priority.lower() in SPOT_PRIORITIES
    return Offering(
        region=worker_group,
        zone=str(zone) if zone not in (None, "") else None,
        instance_type=size,
        market=SPOT if spot else ON_DEMAND,
    )


def override_warnings(launch_config: Mapping[str, Any], path: str) -> list[str]:
    if template_form(launch_config) and not isinstance(arm_location(launch_config), str):
        return [
            f"{path}.armDeployment.parameters.location: no string value; worker-manager takes "
            "the worker group from parameters.location.value"
        ]
    return []


def undeclared_template_parameters(launch_config: Mapping[str, Any], path: str) -> list[str]:
    """An inline ARM template must declare every parameter worker-manager sets, or every
    deployment of it fails. ARM compares parameter names without case. A template named by
    `templateLink` cannot be read here: ARM's refusal names the parameter at launch."""
    deployment = launch_config.get("armDeployment")
    if not isinstance(deployment, Mapping):
        return []
    template = deployment.get("template")
    if not isinstance(template, Mapping):
        return []
    declared = template.get("parameters")
    names = {str(k).lower() for k in declared} if isinstance(declared, Mapping) else set()
    return [
        f"{path}.armDeployment.template.parameters.{name}: not declared; worker-manager sets "
        f"this parameter in every deployment ({', '.join(ARM_INJECTED_PARAMETERS)})"
        for name in ARM_INJECTED_PARAMETERS
        if name.lower() not in names
    ]


def azure_tags(
    *,
    root_url: str,
    pool_id: str,
    provider_id: str,
    location: str,
    launch_config_id: str,
    owner: str,
) -> dict[str, str]:
    """The tags worker-manager puts on every resource of a worker (`#deploymentTags`, over
    the launch config's own `tags`): worker-runner reads the first four from IMDS
    `compute.tagsList` (each required); operators' tooling reads the others."""
    return {
        "worker-pool-id": pool_id,
        "provider-id": provider_id,
        "worker-group": location,
        "root-url": root_url,
        "created-by": f"taskcluster-wm-{provider_id}",
        "managed-by": MANAGED_BY,
        "owner": owner,  # the pool definition's owner
        "launch-config-id": launch_config_id,
    }


def azure_custom_data(*, root_url: str, pool_id: str, provider_id: str, location: str) -> str:
    """`osProfile.customData`: base64 JSON, as worker-manager writes it (worker-runner reads
    the tags instead; customData is written for parity, its workerConfig left empty)."""
    data = {
        "workerPoolId": pool_id,
        "workerGroup": location,
        "providerId": provider_id,
        "rootUrl": root_url,
        "workerConfig": {},
    }
    return base64.b64encode(json.dumps(data).encode()).decode()


def azure_arm_parameters(
    *,
    tags: Mapping[str, str],
    vm_name: str,
    computer_name: str,
    admin_username: str,
    admin_password: str,
    custom_data: str,
) -> dict[str, dict[str, Any]]:
    """The deployment parameters worker-manager sets over the launch config's (in its ARM
    form): the `tags` worker-runner reads from IMDS, the VM's name (the workerId), the boot
    data and generated admin credentials, each as `{"value": ...}`."""
    values = {
        "tags": dict(tags),
        "vmName": vm_name,
        "computerName": computer_name,
        "adminUsername": admin_username,
        "adminPassword": admin_password,
        "customData": custom_data,
    }
    return {name: {"value": values[name]} for name in ARM_INJECTED_PARAMETERS}


def boot_data(facts: BootFacts) -> Mapping[str, Any]:
    """The VM's tags, which worker-runner reads from IMDS `compute.tagsList`."""
    return azure_tags(
        root_url=facts.root_url,
        pool_id=facts.pool_id,
        provider_id=facts.provider_id,
        location=facts.worker_group,
        launch_config_id=facts.launch_config_id,
        owner=facts.owner,
    )


DESCRIPTION = KindDescription(
    name="azure",
    config_model=AzureProviderConfig,
    provider_type="azure",
    launch_config_schema=LAUNCH_CONFIG,
    worker_group=worker_group,
    worker_group_guesses=worker_group_guesses,
    template_form=template_form,
    override_warnings=override_warnings,
    launch_config_problems=undeclared_template_parameters,
    published_budgets=PUBLISHED_BUDGETS,
    budgets_per_region=False,
    create_batch_max=CREATE_BATCH_MAX,
    proof_rejected="Signature validation error",
    boot_data=boot_data,
    offering=offering,
)
