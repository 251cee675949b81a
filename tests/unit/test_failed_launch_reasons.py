"""Launches a cloud failed after accepting them, read back from the worker's stop reason by
its provider: a capacity or quota refusal is told from any other failure, as a refused create
is, so the scan files and benches it the same way."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wm.errors import CloudError, ErrorCategory
from wm.model import WorkerRecord, WorkerState
from wm.providers.azure.launch_failures import failed_launch as azure_failed_launch
from wm.providers.gcp.errors import failed_launch as gcp_failed_launch
from wm.scanning.scan_errors import launch_errors

NOW = datetime(2026, 12, 6, tzinfo=UTC)
CAPACITY, QUOTA, BAD = ErrorCategory.CAPACITY, ErrorCategory.QUOTA, ErrorCategory.BAD_CONFIG
ALLOCATION = "Allocation failed. We do not have sufficient capacity for the requested VM size."
LOW_PRIORITY = (
    "Operation could not be completed as it results in exceeding approved Low Priority Cores "
    "quota. Additional details - Deployment Model: Resource Manager, Location: eastus"
)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("ProvisioningState/failed/AllocationFailed", (CAPACITY, "AllocationFailed")),
        ("ProvisioningState/failed/ZonalAllocationFailed", (CAPACITY, "ZonalAllocationFailed")),
        ("ProvisioningState/failed/OSProvisioningTimedOut", (BAD, "OSProvisioningTimedOut")),
        (f"arm-deployment-failed: AllocationFailed: {ALLOCATION}", (CAPACITY, "AllocationFailed")),
        # A capacity refusal among a deployment's errors says more than the others.
        (
            f"arm-deployment-failed: Conflict: a NIC waited; SkuNotAvailable: {ALLOCATION}",
            (CAPACITY, "SkuNotAvailable"),
        ),
        (
            f"arm-deployment-failed: OperationNotAllowed: {LOW_PRIORITY}",
            (QUOTA, "OperationNotAllowed"),
        ),
        ("arm-deployment-canceled: no error given", (BAD, "LaunchFailed")),
        (
            "arm-deployment-failed: OSProvisioningTimedOut: took too long",
            (BAD, "OSProvisioningTimedOut"),
        ),
        ("spot-eviction", None),
        ("PowerState/deallocated", None),
        (None, None),
    ],
)
def test_azure_reads_the_refusal_a_failed_launch_left(reason, expected):
    refusal = azure_failed_launch("azure", reason)

    if expected is None:
        assert refusal is None
    else:
        assert refusal is not None and (refusal.category, refusal.code) == expected


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (
            "gce-operation-failed: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone "
            "'projects/p/zones/us-central1-a' does not have enough resources available. "
            "(zonesAvailable: us-central1-b)",
            (CAPACITY, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
        ),
        (
            "gce-operation-failed: QUOTA_EXCEEDED: Quota 'N2_CPUS' exceeded.  Limit: 24.0 in "
            "region us-central1.",
            (QUOTA, "QUOTA_EXCEEDED"),
        ),
        ("gce-operation-failed: RESOURCE_NOT_FOUND: no image", (BAD, "RESOURCE_NOT_FOUND")),
        ("preempted", None),
        ("gone from the cloud", None),
    ],
)
def test_gce_reads_the_refusal_its_insert_operation_left(reason, expected):
    refusal = gcp_failed_launch("gcp", reason)

    if expected is None:
        assert refusal is None
    else:
        assert refusal is not None and (refusal.category, refusal.code) == expected
        assert refusal.message and not refusal.message.startswith(refusal.code)


def worker(worker_id: str, reason: str) -> WorkerRecord:
    return WorkerRecord(
        worker_id=worker_id,
        pool_id="proj/pool",
        provider_id="azure",
        launch_config_id="lc-1",
        worker_group="eastus",
        state=WorkerState.STOPPING,
        capacity=1,
        stop_reason=reason,
        created=NOW,
        last_modified=NOW,
        idempotency_token=worker_id,
    )


def test_a_capacity_refusal_found_by_a_scan_is_filed_as_its_own_kind():
    capacity = f"arm-deployment-failed: AllocationFailed: {ALLOCATION}"
    other = "arm-deployment-failed: OSProvisioningTimedOut: took too long"
    failed = [
        (worker("w-1", capacity), CloudError("azure", CAPACITY, "AllocationFailed", ALLOCATION)),
        (worker("w-2", capacity), CloudError("azure", CAPACITY, "AllocationFailed", ALLOCATION)),
        (worker("w-3", other), CloudError("azure", BAD, "OSProvisioningTimedOut", "took")),
    ]

    errors = launch_errors(failed)

    assert [(e.kind, e.title, e.extra["workers"]) for e in errors] == [
        ("capacity", "launch failed: AllocationFailed", 2),
        ("launch-failed", "launch failed: OSProvisioningTimedOut", 1),
    ]
