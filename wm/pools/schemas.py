"""Taskcluster worker-manager's worker pool schemas, as data for wm.pools.json_check.

Transcribed from taskcluster/taskcluster services/worker-manager/schemas (v1/
create-worker-pool-request.yml, update-worker-pool-request.yml, worker-pool-full.yml,
config-null.yml, worker-lifecycle.yml; constants.yml) and the workerPoolId pattern of
src/api.js; each kind's launch config schema (config-aws.yml, config-google.yml,
config-azure.yml, azure-deployment-resources.yml, azure-arm-templates.yml) is in its
description, wm/kinds/<kind>.py. Keep them in step with those files: the unit tests check a
table of definitions against the published JSON schemas too.
"""

from __future__ import annotations

from collections.abc import Mapping

from wm.kinds import KINDS
from wm.kinds.schema_parts import (
    BOOLEAN,
    IDENTIFIER,
    INTEGER_MIN_0,
    MAX_REREGISTRATION_TIMEOUT_S,
    OBJECT,
    closed,
)
from wm.pools.json_check import Schema

NULL_PROVIDER = "null-provider"  # Taskcluster's provider of a deleted pool: any config object

MIN_QUEUE_INACTIVITY_TIMEOUT_S = 1200  # the queue's default claim timeout
DESCRIPTION_MAX_CHARS = 10240
# constants.yml workerpoolid-pattern (also src/api.js), for Python's re.fullmatch.
POOL_ID_PATTERN = r"[a-zA-Z0-9_-]{1,38}/[a-z](?:[-a-z0-9]{0,36}[a-z0-9])?"

POOL_ID: Schema = {
    "type": "string",
    "pattern": POOL_ID_PATTERN,
    "hint": "must be a worker pool id <provisionerId>/<workerType>",
}


LIFECYCLE: Schema = closed(
    {
        "registrationTimeout": {"type": "integer"},
        "reregistrationTimeout": {"type": "integer", "maximum": MAX_REREGISTRATION_TIMEOUT_S},
        "queueInactivityTimeout": {"type": "integer", "minimum": MIN_QUEUE_INACTIVITY_TIMEOUT_S},
    }
)


def _pool_config(launch_config: Schema) -> Schema:
    return closed(
        {
            "minCapacity": INTEGER_MIN_0,
            "maxCapacity": INTEGER_MIN_0,
            "scalingRatio": {"type": "number", "minimum": 0, "maximum": 1},
            "lifecycle": LIFECYCLE,
            "launchConfigs": {"type": "array", "uniqueItems": True, "items": launch_config},
        },
        required=["minCapacity", "maxCapacity", "launchConfigs"],
    )


# By wm's provider kind: each kind's launch config schema is in its description.
CONFIG_SCHEMAS: Mapping[str, Schema] = {
    **{
        name: d.pool_config_schema or _pool_config(d.launch_config_schema)
        for name, d in KINDS.items()
    },
    NULL_PROVIDER: OBJECT,
}

_BODY_PROPERTIES: Mapping[str, Schema] = {
    "providerId": IDENTIFIER,
    "description": {"type": "string", "maxLength": DESCRIPTION_MAX_CHARS},
    "config": OBJECT,  # checked against the provider's schema once the provider is known
    "owner": {"type": "string", "format": "email"},
    "emailOnError": BOOLEAN,
}
_BODY_REQUIRED = ["providerId", "description", "config", "owner", "emailOnError"]
CREATE_BODY: Schema = closed(_BODY_PROPERTIES, required=_BODY_REQUIRED)
UPDATE_BODY: Schema = closed(
    {
        **_BODY_PROPERTIES,
        # Allowed so that a workerPool() answer can be written back; must be the pool's id.
        "workerPoolId": POOL_ID,
        "created": {"type": "string", "format": "date-time"},  # ignored
        "lastModified": {"type": "string", "format": "date-time"},  # ignored
    },
    required=_BODY_REQUIRED,
)
