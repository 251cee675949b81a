"""Azure's provisioning and power states, mapped to wm's worker states by literal tables."""

from __future__ import annotations

import pytest
from azure.mgmt.compute.models import VirtualMachine

from wm.errors import CloudError, ErrorCategory, UnknownCloudState
from wm.model import WorkerState
from wm.providers.azure.errors import classify, retry_after_s
from wm.providers.azure.names import vm_name
from wm.providers.azure.states import (
    REASON_SPOT_EVICTED,
    read_statuses,
    stop_reason,
    view_statuses,
    worker_state,
)
from wmsim.azure.launch_configs import image_reference


@pytest.mark.parametrize(
    ("provisioning", "power", "expected"),
    [
        ("Creating", None, WorkerState.REQUESTED),
        ("Creating", "running", WorkerState.REQUESTED),
        ("Succeeded", "starting", WorkerState.REQUESTED),
        ("Succeeded", "running", WorkerState.RUNNING),
        ("Updating", "running", WorkerState.RUNNING),
        ("Succeeded", "stopping", WorkerState.STOPPING),
        ("Succeeded", "deallocating", WorkerState.STOPPING),
        ("Deleting", "running", WorkerState.STOPPING),
        ("Succeeded", "stopped", WorkerState.STOPPED),
        ("Succeeded", "deallocated", WorkerState.STOPPED),
        ("Failed", None, WorkerState.STOPPED),
    ],
)
def test_states_map_through_the_tables(provisioning: str, power: str | None, expected):
    assert worker_state("azure-x", provisioning, power) is expected


@pytest.mark.parametrize(
    ("provisioning", "power"),
    [("Succeeded", "unknown"), ("Succeeded", None), ("Canceled", "running")],
)
def test_an_unknown_state_is_an_error_not_a_guess(provisioning: str, power: str | None):
    with pytest.raises(UnknownCloudState):
        worker_state("azure-x", provisioning, power)


def test_statuses_give_provisioning_power_and_failure():
    statuses = [
        {"code": "ProvisioningState/failed/ZonalAllocationFailed", "level": "Error"},
        {"code": "PowerState/deallocated"},
    ]
    assert read_statuses(statuses) == ("failed", "deallocated", "ZonalAllocationFailed")
    assert read_statuses(None) == (None, None, None)


def test_reasons_name_spot_eviction_and_failures():
    stopped = WorkerState.STOPPED
    assert stop_reason(stopped, "deallocated", None, spot=True) == REASON_SPOT_EVICTED
    assert stop_reason(stopped, "deallocated", None, spot=False) == "PowerState/deallocated"
    assert stop_reason(stopped, None, "AllocationFailed", spot=False) == (
        "ProvisioningState/failed/AllocationFailed"
    )
    assert stop_reason(WorkerState.RUNNING, "running", None, spot=True) is None


def test_names_are_deterministic_and_valid():
    assert vm_name("w-1") == "vm-w-1"
    odd = vm_name("proj/ci:" + "x" * 80)
    assert odd == vm_name("proj/ci:" + "x" * 80)
    assert len(odd) <= 64
    assert set(odd) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")


def test_images_are_ids_or_urns():
    assert image_reference("/subscriptions/s/images/i") == {"id": "/subscriptions/s/images/i"}
    assert image_reference("a:b:c:latest") == {
        "publisher": "a",
        "offer": "b",
        "sku": "c",
        "version": "latest",
    }
    with pytest.raises(ValueError):
        image_reference("ubuntu")


def test_retry_after_reads_seconds_and_milliseconds():
    assert retry_after_s({"Retry-After": "7"}) == 7.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({}) is None


def test_connection_errors_are_transient():
    from azure.core.exceptions import ServiceRequestError

    error = classify("azure-x", ServiceRequestError("connection refused"))
    assert isinstance(error, CloudError)
    assert error.category is ErrorCategory.TRANSIENT


def test_an_unreachable_token_endpoint_is_transient_and_a_refused_one_bad_config():
    from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError

    try:
        raise ClientAuthenticationError("Authentication failed") from ServiceRequestError("down")
    except ClientAuthenticationError as unreachable:
        assert classify("azure-x", unreachable).category is ErrorCategory.TRANSIENT
    refused = ClientAuthenticationError("AADSTS7000215: Invalid client secret provided.")
    assert classify("azure-x", refused).category is ErrorCategory.BAD_CONFIG


def test_simulated_credentials_need_the_simulated_endpoint():
    from wm.errors import ConfigError
    from wm.kinds.azure import AzureProviderConfig
    from wm.providers.azure.provider import make

    config = AzureProviderConfig(
        id="azure-x",
        kind="azure",
        regions=("eastus",),
        credentials="simulated",
        subscription_id="sub",
        resource_group="rg",
    )
    with pytest.raises(ConfigError, match="endpoint"):
        make(config, "test-deploy")


def test_an_instance_view_reads_the_same_as_a_model_or_as_the_raw_json():
    raw = {"statuses": [{"code": "ProvisioningState/succeeded"}, {"code": "PowerState/running"}]}
    model = VirtualMachine({"location": "eastus", "properties": {"instanceView": raw}})
    expected = ("succeeded", "running", None)
    assert read_statuses(view_statuses(model.properties.instance_view)) == expected
    assert read_statuses(view_statuses(raw)) == expected
    assert view_statuses(None) is None
