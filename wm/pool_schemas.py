"""Taskcluster worker-manager's worker pool schemas, as data for wm.json_check.

Transcribed from taskcluster/taskcluster services/worker-manager/schemas (v1/
create-worker-pool-request.yml, update-worker-pool-request.yml, worker-pool-full.yml,
config-aws.yml, config-google.yml, config-azure.yml, azure-deployment-resources.yml,
azure-arm-templates.yml, config-null.yml, worker-lifecycle.yml; constants.yml) and the
workerPoolId pattern of src/api.js. Keep them in step with those files: the unit tests check
a table of definitions against the published JSON schemas too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from wm.json_check import Schema

NULL_PROVIDER = "null-provider"  # Taskcluster's provider of a deleted pool: any config object

MAX_REREGISTRATION_TIMEOUT_S = 2592000  # 30 days: credentials live no longer
MIN_QUEUE_INACTIVITY_TIMEOUT_S = 1200  # the queue's default claim timeout
DESCRIPTION_MAX_CHARS = 10240
ID_MAX_CHARS = 38
# Keys of an EC2 launch config's additionalUserData that worker-manager writes itself.
AWS_RESERVED_USER_DATA_KEYS = (
    "rootUrl",
    "workerPoolId",
    "providerId",
    "workerGroup",
    "workerConfig",
)
# constants.yml workerpoolid-pattern (also src/api.js), for Python's re.fullmatch.
POOL_ID_PATTERN = r"[a-zA-Z0-9_-]{1,38}/[a-z](?:[-a-z0-9]{0,36}[a-z0-9])?"
TEMPLATE_SPEC_ID_PATTERN = (
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Resources"
    r"/templateSpecs/[^/]+/versions/[^/]+"
)

IDENTIFIER: Schema = {
    "type": "string",
    "pattern": r"[a-zA-Z0-9_-]*",
    "minLength": 1,
    "maxLength": ID_MAX_CHARS,
    "hint": "must be 1 to 38 letters, digits, '-' or '_'",
}
POOL_ID: Schema = {
    "type": "string",
    "pattern": POOL_ID_PATTERN,
    "hint": "must be a worker pool id <provisionerId>/<workerType>",
}
INTEGER_MIN_0: Schema = {"type": "integer", "minimum": 0}
INTEGER_MIN_1: Schema = {"type": "integer", "minimum": 1}
INITIAL_WEIGHT: Schema = {"type": "number", "minimum": 0, "maximum": 1}
_OBJECT: Schema = {"type": "object"}
_STRING: Schema = {"type": "string"}
_ARRAY: Schema = {"type": "array"}
_BOOLEAN: Schema = {"type": "boolean"}
_UNIQUE_STRINGS: Schema = {"type": "array", "uniqueItems": True, "items": _STRING}


def _closed(properties: Mapping[str, Schema], **more: Any) -> Schema:
    """An object holding only these properties."""
    return {"type": "object", "properties": properties, "additionalProperties": False, **more}


def _holds(key: str, *, without: str = "") -> Callable[[Any], bool]:
    return lambda v: isinstance(v, Mapping) and key in v and not (without and without in v)


def _worker_manager(**extra: Schema) -> Schema:
    """A launch config's `workerManager` section (the constants' lc-* entries)."""
    return _closed(
        {
            "launchConfigId": IDENTIFIER,
            "capacityPerInstance": INTEGER_MIN_1,
            "initialWeight": INITIAL_WEIGHT,
            "maxCapacity": INTEGER_MIN_0,
            **extra,
        }
    )


LIFECYCLE: Schema = _closed(
    {
        "registrationTimeout": {"type": "integer"},
        "reregistrationTimeout": {"type": "integer", "maximum": MAX_REREGISTRATION_TIMEOUT_S},
        "queueInactivityTimeout": {"type": "integer", "minimum": MIN_QUEUE_INACTIVITY_TIMEOUT_S},
    }
)


def _pool_config(launch_config: Schema) -> Schema:
    return _closed(
        {
            "minCapacity": INTEGER_MIN_0,
            "maxCapacity": INTEGER_MIN_0,
            "scalingRatio": {"type": "number", "minimum": 0, "maximum": 1},
            "lifecycle": LIFECYCLE,
            "launchConfigs": {"type": "array", "uniqueItems": True, "items": launch_config},
        },
        required=["minCapacity", "maxCapacity", "launchConfigs"],
    )


AWS_LAUNCH_CONFIG: Schema = _closed(
    {
        "workerManager": _worker_manager(),
        "region": _STRING,
        "launchConfig": {
            "type": "object",
            "required": ["ImageId"],
            "properties": {"ImageId": _STRING},
            # `not: {required: [...]}`: refuses only a launch config holding all four.
            "notAllOf": ["IamInstanceProfile", "UserData", "MinCount", "MaxCount"],
        },
        "additionalUserData": {
            "type": "object",
            "properties": {
                key: {"forbidden": "worker-manager sets it"} for key in AWS_RESERVED_USER_DATA_KEYS
            },
        },
        "capacityPerInstance": INTEGER_MIN_1,  # deprecated: workerManager.capacityPerInstance
        "workerConfig": _OBJECT,
    },
    required=["region", "launchConfig"],
)

GOOGLE_LAUNCH_CONFIG: Schema = {
    "type": "object",  # and anything else of the instances.insert body
    "required": [
        "workerConfig",
        "region",
        "zone",
        "machineType",
        "disks",
        "networkInterfaces",
        "scheduling",
    ],
    "properties": {
        "workerManager": _worker_manager(),
        "capacityPerInstance": INTEGER_MIN_1,
        "workerConfig": _OBJECT,
        "region": _STRING,
        "zone": _STRING,
        "machineType": _STRING,
        "disks": _ARRAY,
        "networkInterfaces": _ARRAY,
        "scheduling": _OBJECT,
    },
}

AZURE_RESOURCES: Schema = {
    "type": "object",  # and anything else of the VM body
    "required": ["location", "subnetId", "hardwareProfile", "storageProfile"],
    "properties": {
        "ignoreFailedProvisioningStates": _UNIQUE_STRINGS,  # deprecated: workerManager's
        "location": _STRING,
        "subnetId": _STRING,
        "priority": _STRING,
        "billingProfile": {"type": "object", "properties": {"maxPrice": {"type": "number"}}},
        "hardwareProfile": {
            "type": "object",
            "required": ["vmSize"],
            "properties": {"vmSize": _STRING},
        },
        "osProfile": _OBJECT,
        "storageProfile": {
            "type": "object",
            "required": ["osDisk"],
            "properties": {
                "osDisk": {"type": "object", "properties": {"createOption": _STRING}},
                "dataDisks": {"type": "array", "items": _OBJECT},
                "imageReference": {"type": "object", "properties": {"id": _STRING}},
            },
        },
        "networkProfile": {
            "type": "object",
            "required": ["networkInterfaces"],
            "properties": {
                "networkInterfaces": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"id": _STRING, "primary": _BOOLEAN}},
                },
            },
        },
    },
}

_ARM_PARAMETER: Schema = {
    "type": "object",
    "oneOf": [
        _closed({"value": {}}, required=["value"]),
        _closed(
            {
                "reference": _closed(
                    {
                        "keyVault": _closed({"id": _STRING}),
                        "secretName": _STRING,
                        "secretVersion": _STRING,
                    },
                    required=["keyVault", "secretName"],
                )
            },
            required=["reference"],
        ),
    ],
    "pick": lambda v: 1 if _holds("reference", without="value")(v) else 0,
}

_TEMPLATE_LINK: Schema = {
    "oneOf": [
        _closed(
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
        _closed(
            {"uri": _STRING, "contentVersion": _STRING, "queryString": _STRING},
            required=["uri"],
        ),
    ],
    "pick": lambda v: 1 if _holds("uri", without="id")(v) else 0,
}

_ARM_DEPLOYMENT: Schema = _closed(
    {
        "mode": {"type": "string", "enum": ["Incremental", "Complete"]},
        "template": _OBJECT,
        "templateLink": _TEMPLATE_LINK,
        "parameters": {
            "type": "object",
            "required": ["location"],
            "additionalProperties": _ARM_PARAMETER,
        },
        "parametersLink": _closed({"uri": _STRING, "contentVersion": _STRING}),
        "debugSetting": _closed(
            {
                "detailLevel": {
                    "type": "string",
                    "enum": ["requestContent", "responseContent", "requestContent,responseContent"],
                }
            }
        ),
        "onErrorDeployment": _closed(
            {
                "type": {"type": "string", "enum": ["LastSuccessful", "SpecificDeployment"]},
                "deploymentName": _STRING,
            }
        ),
        "expressionEvaluationOptions": _closed(
            {"scope": {"type": "string", "enum": ["Inner", "Outer"]}}
        ),
    },
    required=["mode"],
    oneOf=[{"required": ["template"]}, {"required": ["templateLink"]}],
    none="needs template or templateLink",
    both="takes template or templateLink, not both",
)

AZURE_ARM: Schema = {
    "type": "object",
    "required": ["armDeployment"],
    "properties": {"armDeploymentResourceGroup": _STRING, "armDeployment": _ARM_DEPLOYMENT},
}

AZURE_LAUNCH_CONFIG: Schema = {
    "allOf": [
        {
            "type": "object",
            "required": ["workerConfig"],
            "properties": {
                "capacityPerInstance": INTEGER_MIN_1,
                "workerManager": _worker_manager(
                    publicIp=_BOOLEAN,
                    ignoreFailedProvisioningStates=_UNIQUE_STRINGS,
                    keepDeployment=_BOOLEAN,
                ),
                "workerConfig": _OBJECT,
                "tags": _OBJECT,
            },
        },
        {
            "oneOf": [AZURE_RESOURCES, AZURE_ARM],
            "pick": lambda v: 1 if _holds("armDeployment")(v) else 0,
            "both": "uses both the resource form (location, subnetId, hardwareProfile, "
            "storageProfile) and armDeployment; use one",
        },
    ]
}

# By wm's provider kind (Taskcluster's google is wm's gcp).
CONFIG_SCHEMAS: Mapping[str, Schema] = {
    "aws": _pool_config(AWS_LAUNCH_CONFIG),
    "gcp": _pool_config(GOOGLE_LAUNCH_CONFIG),
    "azure": _pool_config(AZURE_LAUNCH_CONFIG),
    NULL_PROVIDER: _OBJECT,
}

_BODY_PROPERTIES: Mapping[str, Schema] = {
    "providerId": IDENTIFIER,
    "description": {"type": "string", "maxLength": DESCRIPTION_MAX_CHARS},
    "config": _OBJECT,  # checked against the provider's schema once the provider is known
    "owner": {"type": "string", "format": "email"},
    "emailOnError": _BOOLEAN,
}
_BODY_REQUIRED = ["providerId", "description", "config", "owner", "emailOnError"]
CREATE_BODY: Schema = _closed(_BODY_PROPERTIES, required=_BODY_REQUIRED)
UPDATE_BODY: Schema = _closed(
    {
        **_BODY_PROPERTIES,
        # Allowed so that a workerPool() answer can be written back; must be the pool's id.
        "workerPoolId": POOL_ID,
        "created": {"type": "string", "format": "date-time"},  # ignored
        "lastModified": {"type": "string", "format": "date-time"},  # ignored
    },
    required=_BODY_REQUIRED,
)
