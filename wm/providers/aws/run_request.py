"""RunInstances' parameters for a batch: the launch config's `launchConfig` verbatim, with
exactly worker-manager's overrides (services/worker-manager/src/providers/aws.js: the UserData,
the counts, the instance and volume tags) and wm's own (the ClientToken, ownership tags). Pure."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from wm.kinds import aws as aws_kind
from wm.providers.base import TAG_WORKER, LaunchBatch, ownership_tags, plain

CLIENT_TOKEN_MAX_CHARS = 64  # RunInstances ClientToken limit


def run_request(
    batch: LaunchBatch, provider_id: str, deployment_id: str, root_url: str
) -> dict[str, Any]:
    """RunInstances: the launch config's `launchConfig` verbatim, with exactly
    worker-manager's overrides (UserData, the counts, the instance and volume tags) and
    wm's own (ClientToken, ownership tags). Spot or not is the launchConfig's
    InstanceMarketOptions, like everything else about the instance."""
    spec = batch.spec
    # One user data for the whole call, the same for every instance: worker-runner takes
    # its workerId from the identity document. botocore base64-encodes UserData itself.
    user_data = aws_kind.ec2_user_data(
        root_url=root_url,
        pool_id=batch.pool_id,
        provider_id=provider_id,
        region=spec.region,
        launch_config_id=spec.launch_config_id,
        worker_config=spec.worker_config,
        additional=spec.launch_config.get("additionalUserData"),
    )
    return {
        **plain(spec.launch_config.get("launchConfig") or {}),
        "UserData": json.dumps(user_data),
        # EC2 may launch fewer than asked when capacity is short; those intents get errors.
        "MinCount": 1,
        "MaxCount": len(batch.intents),
        "ClientToken": client_token(batch.batch_token),
        "TagSpecifications": tag_specifications(batch, provider_id, deployment_id),
    }


def tag_specifications(
    batch: LaunchBatch, provider_id: str, deployment_id: str
) -> list[dict[str, Any]]:
    """worker-manager's merge: the user's instance (and volume) tag specifications become
    one, its tags first and worker-manager's appended (a key given twice stays twice, and
    EC2 refuses it, as it does for worker-manager); other resource types pass unchanged."""
    spec = batch.spec
    given = (spec.launch_config.get("launchConfig") or {}).get("TagSpecifications") or []
    user: dict[str, list[dict[str, Any]]] = {"instance": [], "volume": []}
    others = []
    for item in plain(given) if isinstance(given, list | tuple) else [given]:
        if (
            isinstance(item, dict)
            and item.get("ResourceType") in user
            and isinstance(item.get("Tags") or [], list)
        ):
            user[item["ResourceType"]] += item.get("Tags") or []
        else:
            # Other resource types as given; so is anything malformed, which botocore
            # then refuses before sending (a definite bad-config error, not a crash).
            others.append(item)
    owned = ownership_tags(
        deployment_id, provider_id, batch.pool_id, spec.launch_config_id, batch=batch.batch_token
    )
    if len(batch.intents) == 1:
        # One instance per call: the call's tags can name the worker itself.
        owned[TAG_WORKER] = batch.intents[0].worker_id
    ours = [
        *aws_kind.ec2_tags(pool_id=batch.pool_id, provider_id=provider_id, owner=spec.pool_owner),
        *({"Key": key, "Value": value} for key, value in owned.items()),
    ]
    return [
        *others,
        *({"ResourceType": kind, "Tags": [*tags, *ours]} for kind, tags in user.items()),
    ]


def client_token(batch_token: str) -> str:
    """The batch's RunInstances ClientToken: its token, hashed where it is over EC2's limit."""
    if len(batch_token) <= CLIENT_TOKEN_MAX_CHARS:
        return batch_token
    return hashlib.sha256(batch_token.encode()).hexdigest()[:CLIENT_TOKEN_MAX_CHARS]
