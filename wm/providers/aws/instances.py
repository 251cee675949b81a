"""What an EC2 instance's description says, as wm reads it: its state (`STATES`), its tags, what
wm records at launch to check identity documents against, and the CloudInstance a scan sees.
Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wm.errors import UnknownCloudState
from wm.model import CloudInstance, WorkerState
from wm.providers.base import TAG_BATCH, TAG_LAUNCH_CONFIG, TAG_POOL, TAG_WORKER

OWNER_KEY = "OwnerId"  # the reservation's account id, copied onto each of its instances
# StateReason codes of a spot instance that EC2 took back.
SPOT_INTERRUPTION_CODES = frozenset(
    {"Server.SpotInstanceTermination", "Server.SpotInstanceShutdown"}
)

# EC2 instance state name -> wm state. Terminated instances stay listed for about an hour;
# they map to STOPPED so a scan sees them gone.
STATES: Mapping[str, WorkerState] = {
    "pending": WorkerState.REQUESTED,
    "running": WorkerState.RUNNING,
    "shutting-down": WorkerState.STOPPING,
    "stopping": WorkerState.STOPPING,
    "stopped": WorkerState.STOPPED,
    "terminated": WorkerState.STOPPED,
}


def map_state(provider_id: str, name: str) -> WorkerState:
    try:
        return STATES[name]
    except KeyError:
        raise UnknownCloudState(provider_id, name) from None


def cloud_instance(provider_id: str, region: str, raw: Mapping[str, Any]) -> CloudInstance:
    """The instance as wm reads it: its worker, pool and launch config from wm's tags."""
    tags = tags_of(raw)
    state_reason = raw.get("StateReason") or {}
    return CloudInstance(
        worker_id=tags.get(TAG_WORKER),
        cloud_id=raw["InstanceId"],
        region=region,
        state=map_state(provider_id, raw["State"]["Name"]),
        pool_id=tags.get(TAG_POOL),
        launch_config_id=tags.get(TAG_LAUNCH_CONFIG),
        launched_at=raw.get("LaunchTime"),
        reason=state_reason.get("Code") or None,
        preempted=state_reason.get("Code") in SPOT_INTERRUPTION_CODES,
        batch_token=tags.get(TAG_BATCH),
        launch_index=int(raw["AmiLaunchIndex"]) if "AmiLaunchIndex" in raw else None,
        provider_data={
            **identity(raw),
            "private_ip": raw.get("PrivateIpAddress"),
            "spot": raw.get("InstanceLifecycle") == "spot",
            "ec2_state": raw["State"]["Name"],
        },
        tc_worker_id=raw["InstanceId"],
    )


def with_owner(reservation: Mapping[str, Any], instances: list[Any]) -> list[dict[str, Any]]:
    # EC2 names the account on the reservation, not the instance: carried onto each instance
    # so that what wm records per worker holds it (identity documents are checked against it).
    owner = reservation.get("OwnerId")
    return [{**raw, OWNER_KEY: owner} if owner else raw for raw in instances]


def identity(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What wm records at launch and checks identity documents against (identity.py)."""
    return {
        "account_id": raw.get(OWNER_KEY),
        "availability_zone": raw.get("Placement", {}).get("AvailabilityZone"),
        "image_id": raw.get("ImageId"),
        "instance_type": raw.get("InstanceType"),
    }


def tags_of(raw: Mapping[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in raw.get("Tags", [])}
