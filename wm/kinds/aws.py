"""The aws provider kind: EC2 (Taskcluster's providerType `aws`; services/worker-manager/
src/providers/aws.js, schemas/v1/config-aws.yml). Pure: no I/O, no SDK."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from wm.calls import CallClass
from wm.config.base import BudgetLimit, ConfigPath, ProviderConfigBase
from wm.errors import ON_DEMAND, SPOT
from wm.kinds.base import MANAGED_BY, BootFacts, KindDescription, never, no_problems
from wm.kinds.schema_parts import INTEGER_MIN_1, OBJECT, STRING, closed, worker_manager
from wm.model import Offering
from wm.pools.json_check import Schema

# EC2's published defaults, per account and region ("Request throttling for the Amazon EC2
# API": the request and resource token bucket tables). RunInstances and TerminateInstances are
# "uncategorized" actions with request buckets of their own; DescribeInstances, paginated, is a
# non-mutating action.
PUBLISHED_BUDGETS: Mapping[CallClass, BudgetLimit] = {
    CallClass.RUN_INSTANCES_CALLS: BudgetLimit(burst=5, per_s=2),
    CallClass.RUN_INSTANCES: BudgetLimit(burst=1000, per_s=2),
    CallClass.TERMINATE_INSTANCES_CALLS: BudgetLimit(burst=100, per_s=5),
    CallClass.TERMINATE_INSTANCES: BudgetLimit(burst=1000, per_s=20),
    CallClass.DESCRIBE: BudgetLimit(burst=100, per_s=20),
}
# Instances per RunInstances call. worker-manager sends a launch config's whole count in one
# call; wm caps it at a quarter of the resource bucket, so that a burst of a few pools leaves
# in the request bucket's first tokens (5, refilled at 2 a second) instead of queueing behind
# them, and a call's answer stays a few seconds' work.
CREATE_BATCH_MAX = 250
EC2_USER_DATA_MAX_BYTES = 16384  # EC2's limit on raw user data
# Keys of an EC2 launch config's additionalUserData that worker-manager writes itself.
RESERVED_USER_DATA_KEYS = (
    "rootUrl",
    "workerPoolId",
    "providerId",
    "workerGroup",
    "workerConfig",
)
# RunInstances parameters wm sets itself, whatever the launch config says.
OVERRIDDEN_KEYS = ("UserData", "MinCount", "MaxCount", "ClientToken")


class AwsProviderConfig(ProviderConfigBase):
    published_budgets: ClassVar[Mapping[CallClass, BudgetLimit]] = PUBLISHED_BUDGETS

    kind: Literal["aws"]
    # PEM files of AWS's public certificates for instance identity documents, by region; a
    # region without one falls back to `identity_certificate`, then to the packaged ones.
    identity_certificates: Mapping[str, ConfigPath] = Field(default_factory=dict)
    identity_certificate: ConfigPath | None = None


LAUNCH_CONFIG: Schema = closed(
    {
        "workerManager": worker_manager(),
        "region": STRING,
        "launchConfig": {
            "type": "object",
            "required": ["ImageId"],
            "properties": {"ImageId": STRING},
            # `not: {required: [...]}`: refuses only a launch config holding all four.
            "notAllOf": ["IamInstanceProfile", "UserData", "MinCount", "MaxCount"],
        },
        "additionalUserData": {
            "type": "object",
            "properties": {
                key: {"forbidden": "worker-manager sets it"} for key in RESERVED_USER_DATA_KEYS
            },
        },
        "capacityPerInstance": INTEGER_MIN_1,  # deprecated: workerManager.capacityPerInstance
        "workerConfig": OBJECT,
    },
    required=["region", "launchConfig"],
)


def worker_group(launch_config: Mapping[str, Any]) -> Any:
    """The region."""
    return launch_config.get("region")


def worker_group_guesses(launch_config: Mapping[str, Any]) -> tuple[Any, ...]:
    return (launch_config.get("region"),)


def override_warnings(launch_config: Mapping[str, Any], path: str) -> list[str]:
    notes = []
    spec = launch_config.get("launchConfig")
    if isinstance(spec, Mapping):
        notes += [
            f"{path}.launchConfig.{k}: ignored: wm sets it" for k in OVERRIDDEN_KEYS if k in spec
        ]
    user_data = launch_config.get("additionalUserData")
    if isinstance(user_data, Mapping) and "launchConfigId" in user_data:
        notes.append(f"{path}.additionalUserData.launchConfigId: ignored: wm sets it")
    return notes


def ec2_user_data(
    *,
    root_url: str,
    pool_id: str,
    provider_id: str,
    region: str,
    launch_config_id: str,
    worker_config: Mapping[str, Any],
    additional: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The UserData JSON of a RunInstances call (botocore base64-encodes it): the launch
    config's `additionalUserData` first, worker-manager's keys over it."""
    return {
        **dict(additional or {}),
        "rootUrl": root_url,
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "workerGroup": region,
        "launchConfigId": launch_config_id,
        "workerConfig": dict(worker_config),
    }


def ec2_tags(*, pool_id: str, provider_id: str, owner: str) -> list[dict[str, str]]:
    """The tags worker-manager appends to the instance and volume tag specifications, in its
    order (operators' tooling keys on them); `owner` is the pool definition's."""
    tags = {
        "CreatedBy": f"taskcluster-wm-{provider_id}",
        "Owner": owner,
        "ManagedBy": MANAGED_BY,
        "Name": pool_id,
        "WorkerPoolId": pool_id,
    }
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def boot_data(facts: BootFacts) -> Mapping[str, Any]:
    """The instance's user data (JSON), where worker-runner reads it."""
    return ec2_user_data(
        root_url=facts.root_url,
        pool_id=facts.pool_id,
        provider_id=facts.provider_id,
        region=facts.worker_group,
        launch_config_id=facts.launch_config_id,
        worker_config=facts.worker_config,
    )


def offering(launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
    """The worker group is the region; the zone is Placement.AvailabilityZone when the launch
    config pins one (None: EC2 picks, or the subnet decides, which only EC2 can say); spot only
    for InstanceMarketOptions.MarketType "spot" (EC2's enum, lower case; without it EC2
    launches on demand). None without a string InstanceType (EC2 would pick its default)."""
    run = launch_config.get("launchConfig")
    if not isinstance(run, Mapping):
        return None
    instance_type = run.get("InstanceType")
    if not isinstance(instance_type, str) or not instance_type:
        return None
    placement = run.get("Placement")
    zone = placement.get("AvailabilityZone") if isinstance(placement, Mapping) else None
    options = run.get("InstanceMarketOptions")
    market_type = options.get("MarketType") if isinstance(options, Mapping) else None
    return Offering(
        region=worker_group,
        zone=zone if isinstance(zone, str) and zone else None,
        instance_type=instance_type,
        market=SPOT if market_type == "spot" else ON_DEMAND,
    )


DESCRIPTION = KindDescription(
    name="aws",
    config_model=AwsProviderConfig,
    provider_type="aws",
    launch_config_schema=LAUNCH_CONFIG,
    worker_group=worker_group,
    worker_group_guesses=worker_group_guesses,
    template_form=never,
    override_warnings=override_warnings,
    launch_config_problems=no_problems,
    published_budgets=PUBLISHED_BUDGETS,
    budgets_per_region=True,
    create_batch_max=CREATE_BATCH_MAX,
    proof_rejected="Instance identity document validation error",
    boot_data=boot_data,
    offering=offering,
)
