"""RunInstances: the Taskcluster launch configs it comes from (`example_launch_config`), what
reached the cloud (`LaunchRequest`), what EC2 refuses where moto would launch, ClientToken
idempotency, the live-instance quota, and the form moto is given."""

from __future__ import annotations

import base64
import decimal
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wmsim.aws import market as market_ec2
from wmsim.aws.moto_models import DEFAULT_IMAGE
from wmsim.aws.query import decode_query, ec2_model, encode_query, launch_params, off_enum, readable
from wmsim.aws.wire import Answer, ec2_error, error_code, instance_ids
from wmsim.behaviour import Faults, digest
from wmsim.launch_configs import worker_manager
from wmsim.market_sim import SimMarket

USER_DATA_MAX_BYTES = 16384  # EC2's limit on user data, before base64
IMAGE_ROOT_VOLUME_GIB = 8  # the root volume of the sim's images
LAUNCH_REQUESTS_KEPT = 100_000  # RunInstances records kept (the oldest go first)


@dataclass(frozen=True)
class LaunchRequest:
    """One RunInstances that reached the simulated cloud (past the injected faults)."""

    region: str
    # The parameters as boto3 takes them, decoded from the Query API form with EC2's service
    # model; UserData decoded from base64 to its text. Empty lists and structures are absent:
    # they do not travel on the wire.
    parameters: dict[str, Any]
    error: str | None  # EC2's error code when it was refused
    instance_ids: tuple[str, ...]  # what it launched (or, replayed by ClientToken, launched first)


Refusal = tuple[str, str]  # EC2's error code and message
RefusalCheck = Callable[[Any, Mapping[str, Any]], Refusal | None]
IMAGE_ID_PATTERN = re.compile(r"ami-(?:[0-9a-f]{8}|[0-9a-f]{17})")
# RunInstances tags only what it creates (EC2's RunInstances reference, TagSpecification.N).
RUN_INSTANCES_TAGGABLE = frozenset(
    {"instance", "volume", "network-interface", "spot-instances-request"}
)
TAG_KEY_MAX_CHARS, TAG_VALUE_MAX_CHARS = 128, 256
METADATA_HOP_LIMIT_MAX = 64
SPOT_ONE_TIME_TERMINATE = {
    "SpotInstanceType": "one-time",
    "InstanceInterruptionBehavior": "terminate",
}


def example_launch_config(
    region: str,
    *,
    instance_type: str = "m5.large",
    image_id: str | None = None,
    spot: bool = False,
    capacity: int = 1,
    launch_config_id: str | None = None,
    weight: float | None = None,
    max_capacity: int | None = None,
    worker_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Taskcluster AWS launch config (config-aws.yml) that the sim launches as it is: an
    image the sim knows, spot as a one-time request terminated on interruption. `weight` is
    workerManager.initialWeight (0..1 in Taskcluster)."""
    launch_config: dict[str, Any] = {
        "ImageId": image_id or DEFAULT_IMAGE,
        "InstanceType": instance_type,
    }
    if spot:
        launch_config["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": dict(SPOT_ONE_TIME_TERMINATE),
        }
    config: dict[str, Any] = {
        "region": region,
        "launchConfig": launch_config,
        "workerManager": worker_manager(
            capacity=capacity,
            launch_config_id=launch_config_id,
            weight=weight,
            max_capacity=max_capacity,
        ),
    }
    if worker_config is not None:
        config["workerConfig"] = dict(worker_config)
    return config


def run_instances_refusal(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """EC2's refusal of a RunInstances (decoded, as boto3 takes it) where moto would launch
    it: moto itself refuses an unknown SubnetId or SecurityGroupIds entry, an Availability
    Zone of another region, a block device without Ebs and NetworkInterfaces beside SubnetId.
    `backend` is moto's EC2 backend of the request's account and region."""
    for check in _RUN_INSTANCES_CHECKS:
        refusal = check(backend, request)
        if refusal is not None:
            return refusal
    return None


def _refuse_counts(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    for name in ("MinCount", "MaxCount"):
        if name not in request:
            return "MissingParameter", f"The request must contain the parameter {name}"
        if not isinstance(request[name], int) or request[name] < 1:
            return "InvalidParameterValue", (
                f"Value ({request[name]}) for parameter {name} is invalid. "
                "Expected a positive integer."
            )
    if request["MinCount"] > request["MaxCount"]:
        return "InvalidParameterValue", (
            f"Value ({request['MinCount']}) for parameter MinCount is invalid. "
            "It must be less than or equal to MaxCount."
        )
    return None


def _refuse_values(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """A value outside its parameter's enumeration in EC2's service model (MarketType,
    SpotInstanceType, HttpTokens, VolumeType, InstanceType, ResourceType...)."""
    shape = ec2_model().operation_model("RunInstances").input_shape
    off = off_enum(shape, request, "")
    if off is None:
        return None
    path, value = off
    return "InvalidParameterValue", f"Value ({value}) for parameter {path} is invalid."


def _refuse_image(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    image_id = request.get("ImageId")
    if image_id is None:
        if "LaunchTemplate" in request:
            return None
        return "MissingParameter", "The request must contain the parameter ImageId"
    if image_id in backend.amis:
        return None
    if not IMAGE_ID_PATTERN.fullmatch(image_id):
        return "InvalidAMIID.Malformed", f'Invalid id: "{image_id}" (expecting "ami-...")'
    return "InvalidAMIID.NotFound", f"The image id '[{image_id}]' does not exist"


def _refuse_key_pair(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    name = request.get("KeyName")
    if name is None or name in backend.key_pairs:
        return None
    return "InvalidKeyPair.NotFound", f"The key pair '{name}' does not exist"


def _refuse_security_groups(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """Security groups must exist (moto checks only SecurityGroupIds) and sit in the VPC of
    the subnet the instance (or each of its network interfaces) is launched into."""
    interfaces = request.get("NetworkInterfaces") or []
    names = request.get("SecurityGroups") or []
    if not (interfaces or names or request.get("SecurityGroupIds")):
        return None
    default_vpc = backend.get_default_vpc()
    if interfaces and (names or request.get("SecurityGroupIds")):
        return "InvalidParameterCombination", (
            "Network interfaces and an instance-level security groups may not be specified on "
            "the same request"
        )
    if names and request.get("SubnetId"):
        return "InvalidParameterCombination", (
            "The parameter groupName cannot be used with the parameter subnet"
        )
    for name in names:
        vpc_id = default_vpc.id if default_vpc else None
        if backend.get_security_group_from_name(name, vpc_id=vpc_id) is None:
            return "InvalidGroup.NotFound", (
                f"The security group '{name}' does not exist in default VPC '{vpc_id}'"
            )
    placements = [(request.get("SubnetId"), request.get("SecurityGroupIds") or [])]
    if interfaces:
        placements = [(nic.get("SubnetId"), nic.get("Groups") or []) for nic in interfaces]
    for subnet_id, group_ids in placements:
        refusal = group_ids and _refuse_groups_in_subnet(backend, subnet_id, group_ids, default_vpc)
        if refusal:
            return refusal
    return None


def _refuse_groups_in_subnet(
    backend: Any, subnet_id: str | None, group_ids: list[str], default_vpc: Any
) -> Refusal | None:
    from moto.ec2.exceptions import InvalidSubnetIdError

    vpc_id = default_vpc.id if default_vpc else None
    if subnet_id:
        try:
            vpc_id = backend.get_subnet(subnet_id).vpc_id
        except InvalidSubnetIdError:
            return None  # moto answers this one itself
    for group_id in group_ids:
        group = backend.get_security_group_from_id(group_id)
        if group is None:
            return "InvalidGroup.NotFound", f"The security group '{group_id}' does not exist"
        if vpc_id is not None and group.vpc_id != vpc_id:
            where = f"subnet {subnet_id}" if subnet_id else f"default VPC {vpc_id}"
            return "InvalidParameter", (
                f"Security group {group_id} and {where} belong to different networks."
            )
    return None


def _refuse_instance_profile(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """An instance profile that does not exist (moto answers IAM's NoSuchEntity, 404)."""
    from moto.iam.models import iam_backends
    from moto.utilities.utils import get_partition

    profile = request.get("IamInstanceProfile")
    if not profile:
        return None
    iam = iam_backends[backend.account_id][get_partition(backend.region_name)]
    known = list(iam.get_instance_profiles())
    for field, wanted in (("Arn", profile.get("Arn")), ("Name", profile.get("Name"))):
        if wanted is not None and not any(
            (p.arn if field == "Arn" else p.name) == wanted for p in known
        ):
            return "InvalidParameterValue", (
                f"Value ({wanted}) for parameter iamInstanceProfile.{field.lower()} is "
                f"invalid. Invalid IAM Instance Profile {field.lower()}"
            )
    return None


def _refuse_market_options(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """A malformed spot block (enumerated values are checked with the others)."""
    options = request.get("InstanceMarketOptions")
    if options is None:
        return None
    market = options.get("MarketType")
    spot = options.get("SpotOptions") or {}
    if market is None:
        return "MissingParameter", (
            "The request must contain the parameter InstanceMarketOptions.MarketType"
        )
    if market != "spot":
        if spot:
            return (
                "InvalidParameterCombination",
                "SpotOptions can only be given for MarketType spot",
            )
        target = (request.get("CapacityReservationSpecification") or {}).get(
            "CapacityReservationTarget"
        )
        if not target:
            return "InvalidParameterCombination", (
                "A capacity-block launch must target a Capacity Block reservation "
                "(CapacityReservationSpecification.CapacityReservationTarget)"
            )
        return None
    kind = spot.get("SpotInstanceType", "one-time")
    behaviour = spot.get("InstanceInterruptionBehavior", "terminate")
    if kind == "persistent" and behaviour == "terminate":
        return "InvalidParameterCombination", (
            "For RunInstances, persistent Spot Instance requests are only supported when the "
            "instance interruption behavior is either hibernate or stop."
        )
    if kind == "one-time" and behaviour != "terminate":
        return "InvalidParameterCombination", (
            f"The instance interruption behavior {behaviour} is only supported for persistent "
            "Spot Instance requests."
        )
    if kind == "one-time" and "ValidUntil" in spot:
        return "InvalidParameterCombination", (
            "ValidUntil is only supported for persistent Spot Instance requests."
        )
    if "MaxPrice" in spot and not _positive_decimal(spot["MaxPrice"]):
        return "InvalidParameterValue", (
            f"Value ({spot['MaxPrice']}) for parameter SpotOptions.MaxPrice is invalid."
        )
    return None


def _refuse_metadata_options(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    hops = (request.get("MetadataOptions") or {}).get("HttpPutResponseHopLimit")
    if hops is None or (isinstance(hops, int) and 1 <= hops <= METADATA_HOP_LIMIT_MAX):
        return None
    return "InvalidParameterValue", (
        f"Value ({hops}) for parameter HttpPutResponseHopLimit is invalid. "
        f"It must be between 1 and {METADATA_HOP_LIMIT_MAX}."
    )


def _refuse_tags(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    seen: set[str] = set()
    for spec in request.get("TagSpecifications") or []:
        kind = spec.get("ResourceType")
        if kind not in RUN_INSTANCES_TAGGABLE:
            return "InvalidParameterValue", (
                f"'{kind}' is not a valid taggable resource type for this operation."
            )
        if kind in seen:
            return "InvalidParameterValue", (
                "The same resource type may not be specified more than once in tag specifications"
            )
        seen.add(kind)
        keys: set[str] = set()
        for tag in spec.get("Tags") or []:
            key, value = tag.get("Key", ""), tag.get("Value", "")
            if key in keys:
                return "InvalidParameterValue", f"Duplicate tag key '{key}' specified."
            keys.add(key)
            if key.lower().startswith("aws:"):
                return "InvalidParameterValue", (
                    "Tag keys starting with 'aws:' are reserved for internal use"
                )
            if not 1 <= len(key) <= TAG_KEY_MAX_CHARS or len(value) > TAG_VALUE_MAX_CHARS:
                return "InvalidParameterValue", (
                    f"Tag key '{key[:TAG_KEY_MAX_CHARS]}' or its value is too long (keys "
                    f"1..{TAG_KEY_MAX_CHARS} characters, values up to {TAG_VALUE_MAX_CHARS})"
                )
    return None


def _refuse_user_data(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    encoded = request.get("UserData")
    if encoded is None:
        return None
    try:
        raw = base64.b64decode(encoded, validate=True)
    except ValueError:
        return "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data."
    if len(raw) > USER_DATA_MAX_BYTES:
        return "InvalidParameterValue", f"User data is limited to {USER_DATA_MAX_BYTES} bytes"
    return None


_RUN_INSTANCES_CHECKS: tuple[RefusalCheck, ...] = (
    _refuse_counts,
    _refuse_tags,  # before the enumerations: EC2's own message for a type it cannot tag
    _refuse_values,
    _refuse_image,
    _refuse_key_pair,
    _refuse_security_groups,
    _refuse_instance_profile,
    _refuse_market_options,
    _refuse_metadata_options,
    _refuse_user_data,
)


def _positive_decimal(text: Any) -> bool:
    try:
        return decimal.Decimal(str(text)) > 0
    except decimal.InvalidOperation:
        return False


def moto_form(params: dict[str, str]) -> dict[str, str]:
    """The RunInstances form moto is given, where moto reads a request otherwise than EC2
    (what was asked stays in the launch record):

    - EC2 takes an instance-store mapping (VirtualName, no Ebs) and an Ebs mapping without
      size or snapshot (the image's root device, sized by the image); moto refuses both with
      MissingParameter. They reach moto as EBS volumes of the image's size, instance stores
      not at all;
    - moto makes any instance with InstanceMarketOptions a spot instance: a capacity-block
      launch reaches it without them.
    """
    form = dict(params)
    if params.get("InstanceMarketOptions.MarketType", "spot") != "spot":
        form = {k: v for k, v in form.items() if not k.startswith("InstanceMarketOptions.")}
    if not any(key.startswith("BlockDeviceMapping.") for key in form):
        return form
    kept = []
    for mapping in decode_query("RunInstances", form).get("BlockDeviceMappings", []):
        ebs = mapping.get("Ebs")
        if ebs is not None and "VolumeSize" not in ebs and "SnapshotId" not in ebs:
            mapping = {**mapping, "Ebs": {**ebs, "VolumeSize": IMAGE_ROOT_VOLUME_GIB}}
        if ebs is not None or "NoDevice" in mapping:
            kept.append(mapping)
    shape = ec2_model().operation_model("RunInstances").input_shape.members["BlockDeviceMappings"]
    rest = {k: v for k, v in form.items() if not k.startswith("BlockDeviceMapping.")}
    return {**rest, **encode_query(shape, kept, "BlockDeviceMapping")}


class RunInstances:
    """SimEc2's RunInstances (its state lives on SimEc2, wmsim/aws/ec2.py)."""

    faults: Faults
    market: SimMarket | None

    def _run_instances(
        self, environ: dict[str, Any], params: dict[str, str], region: str
    ) -> Answer:
        request = decode_query("RunInstances", params)
        answer = self._run_instances_answer(environ, params, request, region)
        self._launch_requests.append(
            LaunchRequest(region, readable(request), error_code(answer), instance_ids(answer))
        )
        return answer

    def _run_instances_answer(
        self, environ: dict[str, Any], params: dict[str, str], request: dict[str, Any], region: str
    ) -> Answer:
        token = params.get("ClientToken")
        if token and token in self._client_tokens:
            first_digest, first_answer = self._client_tokens[token]
            if first_digest != digest(launch_params(params)):
                return ec2_error(
                    400,
                    "IdempotentParameterMismatch",
                    "The client token you have provided is associated with a resource that is "
                    "already deleted or with different parameters.",
                )
            return first_answer
        refusal = run_instances_refusal(self._backend(region), request)
        if refusal is not None:
            return ec2_error(400, *refusal)
        answer = self._launch(environ, params, region, request)
        if token and answer.status.startswith("200"):
            self._client_tokens[token] = (digest(launch_params(params)), answer)
        return answer

    def _no_capacity(self, params: dict[str, str], region: str) -> Answer | None:
        """EC2's refusal of a type in a zone (or region) the behaviour says is dry, in EC2's
        words: the zones that do have capacity are named (aws-parallelcluster#2716)."""
        dry = set(self.faults.behaviour.no_capacity)
        instance_type = params.get("InstanceType", "m1.small")
        zone = params.get("Placement.AvailabilityZone")
        if f"{instance_type}@{region}" not in dry and f"{instance_type}@{zone}" not in dry:
            return None
        zones = [z.name for z in self._backend(region).describe_availability_zones()]
        others = [z for z in zones if z != zone and f"{instance_type}@{z}" not in dry]
        where = f"the Availability Zone you requested ({zone})" if zone else "your region"
        return ec2_error(
            500,
            "InsufficientInstanceCapacity",
            f"We currently do not have sufficient {instance_type} capacity in {where}. Our "
            "system will be working on provisioning additional capacity. You can currently get "
            f"{instance_type} capacity by not specifying an Availability Zone in your request "
            f"or choosing {', '.join(others)}.",
        )

    def _launch(
        self,
        environ: dict[str, Any],
        params: dict[str, str],
        region: str,
        request: Mapping[str, Any],
    ) -> Answer:
        wanted_min = int(params.get("MinCount", "1"))
        wanted_max = int(params.get("MaxCount", str(wanted_min)))
        refusal = self._no_capacity(params, region)
        if refusal is not None:
            return refusal
        launch = wanted_max
        quota = self.faults.behaviour.quota_instances
        if quota is not None:
            live = sum(
                1
                for r, inst in self._all_instances()
                if r == region and inst.state not in ("stopped", "terminated")
            )
            room = max(0, quota - live)
            if room < wanted_min:
                return ec2_error(
                    400,
                    "InstanceLimitExceeded",
                    f"You have requested more instances ({live + wanted_min}) than your current "
                    f"instance limit of {quota} allows for the specified instance type. Please "
                    "visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment "
                    "to this limit.",
                )
            launch = min(wanted_max, room)
        form = moto_form(params)
        market = self.market
        offering = grant = None
        if market is not None:
            zone, instance_type, spot = market_ec2.offering_params(request)
            if instance_type:
                offering = market.offering(market_ec2.KIND, region, zone, instance_type, spot)
            grant = market.grant(offering, wanted_min, launch)
            if grant.refusal is not None:
                return market_ec2.refusal_answer(grant.refusal, wanted_min, zone is not None)
            launch = grant.count
            if offering is not None and offering.zone and not zone:
                form["Placement.AvailabilityZone"] = offering.zone  # where EC2 chose to put it
        # moto launches MinCount instances; EC2 launches as many up to MaxCount as fit.
        answer = self._call_moto(
            environ, {**form, "MinCount": str(launch), "MaxCount": str(launch)}
        )
        if market is not None and grant is not None:
            launched = instance_ids(answer)
            market.release(offering, grant.count - len(launched))
            tags = market_ec2.instance_tags(request)
            for instance_id in launched:
                market.started(market_ec2.KIND, instance_id, offering, tags)
        return answer
