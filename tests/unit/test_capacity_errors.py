"""Capacity and quota refusals, told apart on each cloud with the clouds' own codes and
messages, and the launches each says will fail too (its scope).

Messages as the clouds word them: EC2's from its troubleshooting page and
aws-parallelcluster#2716 (the zones with capacity), GCE's from "Troubleshooting VM creation"
and its quota errors, Azure's from "Troubleshoot allocation failures" and Karpenter-Azure's
fakes (Low Priority cores)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ODataV4Format

from wm.errors import ON_DEMAND, SPOT, ErrorCategory, ErrorScope
from wm.model import LaunchSpec
from wm.providers.aws import errors as aws
from wm.providers.azure import errors as azure
from wm.providers.gcp import errors as gcp

CAPACITY, QUOTA = ErrorCategory.CAPACITY, ErrorCategory.QUOTA


def spec(region: str, launch_config: Mapping[str, Any]) -> LaunchSpec:
    return LaunchSpec("lc-1", region, 1, launch_config=launch_config)


# --- EC2 ------------------------------------------------------------------------------------

EC2_SPOT_IN_ZONE = spec(
    "us-east-1",
    {
        "launchConfig": {
            "InstanceType": "m5.large",
            "Placement": {"AvailabilityZone": "us-east-1a"},
            "InstanceMarketOptions": {"MarketType": "spot"},
        }
    },
)
EC2_ON_DEMAND = spec("us-east-1", {"launchConfig": {"InstanceType": "p3.2xlarge"}})
ICE_NAMING_ZONES = (
    "We currently do not have sufficient m5.large capacity in the Availability Zone you "
    "requested (us-east-1a). Our system will be working on provisioning additional capacity. "
    "You can currently get m5.large capacity by not specifying an Availability Zone in your "
    "request or choosing us-east-1b, us-east-1c."
)
VCPU_LIMIT = (
    "You have requested more vCPU capacity than your current vCPU limit of 32 allows for the "
    "instance bucket that the specified instance type belongs to. Please visit "
    "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
)


@pytest.mark.parametrize(
    ("code", "status", "category"),
    [
        ("InsufficientInstanceCapacity", 500, CAPACITY),
        ("InsufficientHostCapacity", 500, CAPACITY),
        ("InsufficientReservedInstanceCapacity", 500, CAPACITY),
        ("UnfulfillableCapacity", 400, CAPACITY),
        ("SpotMaxPriceTooLow", 400, CAPACITY),
        ("InstanceLimitExceeded", 400, QUOTA),
        ("VcpuLimitExceeded", 400, QUOTA),
        ("MaxSpotInstanceCountExceeded", 400, QUOTA),
        ("InsufficientFreeAddressesInSubnet", 400, QUOTA),
        # A type EC2 never offers in that zone: a definition to fix, not a wait.
        ("Unsupported", 400, ErrorCategory.BAD_CONFIG),
    ],
)
def test_ec2_tells_capacity_from_quota_by_code(code: str, status: int, category: ErrorCategory):
    assert aws.category_for(code, status) is category


@pytest.mark.parametrize(
    ("code", "message", "launch", "scope"),
    [
        (
            "InsufficientInstanceCapacity",
            ICE_NAMING_ZONES,
            EC2_SPOT_IN_ZONE,
            ErrorScope(
                CAPACITY,
                "us-east-1",
                zone="us-east-1a",
                instance_type="m5.large",
                market=SPOT,
                zones_with_capacity=("us-east-1b", "us-east-1c"),
            ),
        ),
        (
            "InsufficientInstanceCapacity",
            "There is no Spot capacity available that matches your request.",
            EC2_SPOT_IN_ZONE,
            ErrorScope(
                CAPACITY, "us-east-1", zone="us-east-1a", instance_type="m5.large", market=SPOT
            ),
        ),
        (
            "SpotMaxPriceTooLow",
            "Your Spot request price of 0.001 is lower than the minimum required Spot request "
            "fulfillment price of 0.0243.",
            EC2_SPOT_IN_ZONE,
            ErrorScope(
                CAPACITY, "us-east-1", zone="us-east-1a", instance_type="m5.large", market=SPOT
            ),
        ),
        (
            "InstanceLimitExceeded",
            VCPU_LIMIT,
            EC2_SPOT_IN_ZONE,
            ErrorScope(QUOTA, "us-east-1", family="Standard", market=SPOT),
        ),
        (
            "VcpuLimitExceeded",
            VCPU_LIMIT,
            EC2_ON_DEMAND,
            ErrorScope(QUOTA, "us-east-1", family="P", market=ON_DEMAND),
        ),
        (
            "MaxSpotInstanceCountExceeded",
            "Max spot instance count exceeded",
            EC2_SPOT_IN_ZONE,
            ErrorScope(QUOTA, "us-east-1", market=SPOT),
        ),
        (
            "InsufficientFreeAddressesInSubnet",
            "There are not enough free addresses in subnet 'subnet-1' to satisfy the requested "
            "number of instances.",
            EC2_SPOT_IN_ZONE,
            ErrorScope(QUOTA, "us-east-1", zone="us-east-1a"),
        ),
        ("InvalidAMIID.NotFound", "The image id '[ami-1]' does not exist", EC2_ON_DEMAND, None),
    ],
)
def test_ec2_refusals_name_the_launches_they_hold_for(
    code: str, message: str, launch: LaunchSpec, scope: ErrorScope | None
):
    assert aws.error_scope(code, message, launch) == scope


@pytest.mark.parametrize(
    ("instance_type", "bucket"),
    [
        ("m5.large", "Standard"),
        ("c6i.32xlarge", "Standard"),
        ("t3.micro", "Standard"),
        ("g4dn.xlarge", "G and VT"),
        ("vt1.3xlarge", "G and VT"),
        ("p4d.24xlarge", "P"),
        ("inf2.xlarge", "Inf"),
        ("trn1.2xlarge", "Trn"),
        ("dl1.24xlarge", "DL"),
        ("hpc7g.4xlarge", "HPC"),
        ("x2idn.16xlarge", "X"),
        ("f1.2xlarge", "F"),
        ("u-6tb1.metal", "High Memory"),
        ("mac1.metal", "Standard"),
    ],
)
def test_ec2_counts_vcpu_quotas_per_bucket_of_families(instance_type: str, bucket: str):
    assert aws.quota_bucket(instance_type) == bucket


# --- GCE ------------------------------------------------------------------------------------

GCE_SPOT = spec(
    "us-central1-a",
    {
        "region": "us-central1",
        "zone": "us-central1-a",
        "machineType": "zones/us-central1-a/machineTypes/n2-standard-4",
        "scheduling": {"provisioningModel": "SPOT"},
    },
)
GCE_PREEMPTIBLE = spec(
    "us-west1-b",
    {"zone": "us-west1-b", "machineType": "e2-medium", "scheduling": {"preemptible": True}},
)
GCE_STANDARD = spec("us-west1-b", {"zone": "us-west1-b", "machineType": "e2-medium"})
EXHAUSTED = (
    "The zone 'projects/proj/zones/us-central1-a' does not have enough resources available to "
    "fulfill the request.  Try a different zone, or try again later."
)
EXHAUSTED_WITH_DETAILS = (
    "The zone 'projects/proj/zones/us-central1-a' does not have enough resources available to "
    "fulfill the request.  '(resource type:compute)'."
)


@pytest.mark.parametrize(
    ("code", "category"),
    [
        ("ZONE_RESOURCE_POOL_EXHAUSTED", CAPACITY),
        ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", CAPACITY),
        ("QUOTA_EXCEEDED", QUOTA),
    ],
)
def test_gce_operations_tell_capacity_from_quota(code: str, category: ErrorCategory):
    from google.cloud import compute_v1

    op = compute_v1.Operation(name="op", status="DONE", operation_type="insert")
    op.error = compute_v1.Error(errors=[compute_v1.Errors(code=code, message="why")])
    op.http_error_status_code = 503 if category is CAPACITY else 403
    error = gcp.operation_error("gcp", op, "instances.insert")
    assert error is not None and error.category is category


def test_a_gce_pool_exhausted_operation_names_the_zones_that_have_the_type():
    from google.cloud import compute_v1

    op = compute_v1.Operation(name="op", status="DONE", operation_type="insert")
    info = compute_v1.ErrorInfo(
        reason="ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        metadatas={"zonesAvailable": "us-central1-b,us-central1-f"},
    )
    op.error = compute_v1.Error(
        errors=[
            compute_v1.Errors(
                code="ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                message=EXHAUSTED_WITH_DETAILS,
                error_details=[compute_v1.ErrorDetails(error_info=info)],
            )
        ]
    )
    error = gcp.operation_error("gcp", op, "instances.insert")

    assert error is not None
    scope = gcp.error_scope(error.code, error.message, GCE_SPOT)
    assert scope is not None
    assert scope.zones_with_capacity == ("us-central1-b", "us-central1-f")


def test_a_synchronous_gce_refusal_is_coded_by_the_reason_that_makes_it_capacity():
    from tests.unit.test_gcp_states import http_error

    error = gcp.classify(
        "gcp", http_error(503, "resourceExhausted", info="ZONE_RESOURCE_POOL_EXHAUSTED")
    )
    assert (error.category, error.code) == (CAPACITY, "ZONE_RESOURCE_POOL_EXHAUSTED")
    assert gcp.error_scope(error.code, EXHAUSTED, GCE_SPOT) is not None


@pytest.mark.parametrize(
    ("code", "message", "launch", "scope"),
    [
        (
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            EXHAUSTED,
            GCE_SPOT,
            ErrorScope(
                CAPACITY,
                "us-central1",
                zone="us-central1-a",
                instance_type="n2-standard-4",
                market=SPOT,
            ),
        ),
        (
            "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            EXHAUSTED_WITH_DETAILS,
            GCE_STANDARD,
            ErrorScope(
                CAPACITY,
                "us-west1",
                zone="us-west1-b",
                instance_type="e2-medium",
                market=ON_DEMAND,
            ),
        ),
        (
            "QUOTA_EXCEEDED",
            "Quota 'N2_CPUS' exceeded.  Limit: 24.0 in region us-central1.",
            GCE_SPOT,
            ErrorScope(QUOTA, "us-central1", family="N2"),
        ),
        (
            "quotaExceeded",
            "Quota 'PREEMPTIBLE_CPUS' exceeded.  Limit: 0.0 in region us-west1.",
            GCE_PREEMPTIBLE,
            ErrorScope(QUOTA, "us-west1", market=SPOT),
        ),
        (
            "QUOTA_EXCEEDED",
            "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-west1.",
            GCE_STANDARD,
            ErrorScope(QUOTA, "us-west1"),
        ),
        (
            "QUOTA_EXCEEDED",
            "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 1.0 globally.",
            GCE_STANDARD,
            ErrorScope(QUOTA, None),
        ),
        ("QUOTA_EXCEEDED", "over a limit", GCE_SPOT, ErrorScope(QUOTA, "us-central1")),
        ("RESOURCE_NOT_FOUND", "The resource was not found", GCE_SPOT, None),
    ],
)
def test_gce_refusals_name_the_launches_they_hold_for(
    code: str, message: str, launch: LaunchSpec, scope: ErrorScope | None
):
    assert gcp.error_scope(code, message, launch) == scope


# --- Azure ----------------------------------------------------------------------------------

AZURE_SPOT_IN_ZONE = spec(
    "eastus",
    {"location": "eastus", "priority": "Spot", "hardwareProfile": {"vmSize": "Standard_D2s_v3"}}
    | {"zones": ["2"]},
)
AZURE_ARM_TEMPLATE = spec(
    "westus2",
    {
        "armDeployment": {
            "parameters": {
                "location": {"value": "westus2"},
                "vmSize": {"value": "Standard_NV12s_v3"},
                "priority": {"value": "Spot"},
            }
        }
    },
)
AZURE_REGULAR = spec(
    "eastus", {"location": "eastus", "hardwareProfile": {"vmSize": "Standard_D2s_v3"}}
)
ALLOCATION_FAILED = (
    "Allocation failed. We do not have sufficient capacity for the requested VM size in this "
    "region. Read more about improving likelihood of allocation success at "
    "http://aka.ms/allocation-guidance"
)
ZONAL_ALLOCATION_FAILED = ALLOCATION_FAILED.replace("in this region", "in this zone")
SKU_NOT_AVAILABLE = (
    "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: "
    "Standard_NV12s_v3' is currently not available in location 'westus2'. Please try another "
    "size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable "
    "for details."
)
OVERCONSTRAINED = (
    "Allocation failed. VM(s) with the following constraints cannot be allocated, because the "
    "condition is too restrictive. Please remove some constraints and try again. Constraints "
    "applied are: - Networking Constraints (such as Accelerated Networking or IPv6) - VM Size"
)


def quota_message(which: str, location: str) -> str:
    return (
        f"Operation could not be completed as it results in exceeding approved {which} quota. "
        f"Additional details - Deployment Model: Resource Manager, Location: {location}, "
        "Current Limit: 0, Current Usage: 0, Additional Required: 32, (Minimum) New Limit "
        "Required: 32. Submit a request for Quota increase at https://aka.ms/ProdportalCRP/"
    )


LOW_PRIORITY = quota_message("Low Priority Cores", "westus2")
FAMILY = quota_message("standardDSv3Family Cores", "eastus")
REGIONAL = quota_message("Total Regional Cores", "eastus")


def arm_error(status: int, code: str, message: str) -> HttpResponseError:
    """azure-core's exception for an ARM error answer of this status and body."""
    exc = HttpResponseError(message=message)
    exc.status_code = status
    exc.error = ODataV4Format({"code": code, "message": message})
    return exc


@pytest.mark.parametrize(
    ("status", "code", "message", "category"),
    [
        (409, "AllocationFailed", ALLOCATION_FAILED, CAPACITY),
        (409, "ZonalAllocationFailed", ZONAL_ALLOCATION_FAILED, CAPACITY),
        (409, "SkuNotAvailable", SKU_NOT_AVAILABLE, CAPACITY),
        (409, "OverconstrainedAllocationRequest", OVERCONSTRAINED, CAPACITY),
        (409, "OverconstrainedZonalAllocationRequest", OVERCONSTRAINED, CAPACITY),
        (409, "OperationNotAllowed", LOW_PRIORITY, QUOTA),
        (409, "OperationNotAllowed", FAMILY, QUOTA),
        (409, "QuotaExceeded", REGIONAL, QUOTA),
        # Not a quota: a disk still attached, to delete later.
        (409, "OperationNotAllowed", "Disk d-1 is attached to VM vm-1.", ErrorCategory.BAD_CONFIG),
    ],
)
def test_arm_tells_capacity_from_quota(
    status: int, code: str, message: str, category: ErrorCategory
):
    error = azure.classify("azure", arm_error(status, code, message))
    assert (error.category, error.code) == (category, code)


@pytest.mark.parametrize(
    ("code", "message", "launch", "scope"),
    [
        (
            "ZonalAllocationFailed",
            ZONAL_ALLOCATION_FAILED,
            AZURE_SPOT_IN_ZONE,
            ErrorScope(CAPACITY, "eastus", zone="2", instance_type="Standard_D2s_v3", market=SPOT),
        ),
        (
            "SkuNotAvailable",
            SKU_NOT_AVAILABLE,
            AZURE_ARM_TEMPLATE,
            ErrorScope(CAPACITY, "westus2", instance_type="Standard_NV12s_v3", market=SPOT),
        ),
        (
            "AllocationFailed",
            ALLOCATION_FAILED,
            AZURE_REGULAR,
            ErrorScope(CAPACITY, "eastus", instance_type="Standard_D2s_v3", market=ON_DEMAND),
        ),
        (
            "OperationNotAllowed",
            LOW_PRIORITY,
            AZURE_ARM_TEMPLATE,
            ErrorScope(QUOTA, "westus2", market=SPOT),
        ),
        (
            "OperationNotAllowed",
            quota_message("LowPriorityCores", "westus2"),
            AZURE_SPOT_IN_ZONE,
            ErrorScope(QUOTA, "westus2", market=SPOT),
        ),
        (
            "OperationNotAllowed",
            FAMILY,
            AZURE_REGULAR,
            ErrorScope(QUOTA, "eastus", family="standardDSv3Family", market=ON_DEMAND),
        ),
        ("QuotaExceeded", REGIONAL, AZURE_REGULAR, ErrorScope(QUOTA, "eastus", market=ON_DEMAND)),
        (
            "QuotaExceeded",
            "Quota exceeded.",
            AZURE_SPOT_IN_ZONE,
            ErrorScope(QUOTA, "eastus", market=SPOT),
        ),
        ("OperationNotAllowed", "Disk d-1 is attached to VM vm-1.", AZURE_REGULAR, None),
    ],
)
def test_arm_refusals_name_the_launches_they_hold_for(
    code: str, message: str, launch: LaunchSpec, scope: ErrorScope | None
):
    assert azure.error_scope(code, message, launch) == scope
