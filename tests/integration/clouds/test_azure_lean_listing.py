"""wm's Azure scans read the VM lists' JSON for the fields wm reads (wm/providers/azure/listing.py):
on ARM-shaped answers (tests/fixtures/azure_lists) and on the simulated ARM's, every one of those
fields is what the SDK's own models hold for the same answers, the instances a scan builds from
them are those it built from the SDK's models, and a failed list raises what the SDK raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute.models import VirtualMachine

from tests.fixtures.sim_arm import (
    AZURE_RESOURCE_GROUP,
    AZURE_ROOT_URL,
    AZURE_SUBSCRIPTION,
    compute_client,
)
from tests.integration.clouds.test_azure import batch, launch_config
from tests.support.legacy_vms import legacy_vm
from wm.providers.azure.errors import classify
from wm.providers.azure.listing import (
    fetch_json_page,
    json_fields,
    json_statuses,
    model_fields,
    vm_list_request,
)
from wm.providers.azure.provider import AzureProvider
from wm.providers.azure.states import read_statuses
from wmsim.azure.arm import SimArm

ANSWERS = Path(__file__).parents[2] / "fixtures" / "azure_lists"
REGION = "eastus"


def answer(name: str) -> dict[str, Any]:
    return json.loads((ANSWERS / name).read_text())


def statuses_of(model: Any) -> Any:
    view = model.properties.instance_view if model.properties is not None else None
    return None if view is None else view.statuses


def codes(statuses: Any) -> list[str] | None:
    if statuses is None:
        return None
    return [s["code"] if isinstance(s, dict) else s.code for s in statuses]


def test_an_arm_answers_fields_are_what_the_sdks_models_hold():
    # Scenario: a page of a resource group's VMs (wm's Spot VM, worker-manager's VM with its NIC,
    # attached OS disk and data disks, a bare VM) and the status list of the same VMs.
    page = answer("vm_list_page.json")
    statuses = answer("vm_status_page.json")

    # Outcome: each field the lean path reads, and each status, equal to the SDK's models'.
    for raw in page["value"]:
        assert json_fields(raw) == model_fields(VirtualMachine(raw)), raw["name"]
    for raw in statuses["value"]:
        model = VirtualMachine(raw)
        assert codes(json_statuses(raw)) == codes(statuses_of(model)), raw["name"]
        assert read_statuses(json_statuses(raw)) == read_statuses(statuses_of(model))
    # What the fixtures hold is what the test means to cover.
    spot, legacy, bare = (json_fields(raw) for raw in page["value"])
    assert spot.priority == "Spot" and spot.os_disk_create_option == "FromImage"
    assert spot.time_created is not None and spot.time_created.microsecond == 123456
    assert len(legacy.nic_ids) == 1 and len(legacy.data_disk_ids) == 1 and legacy.os_disk_id
    assert bare.tags == {} and bare.time_created is None and bare.vm_id is None


def test_the_simulated_arms_lists_read_lean_hold_what_the_sdk_lists(
    sim_arm: SimArm, make_azure_provider: Any
):
    # Scenario: wm's VMs running, evicted (Spot), stopped and failed, and worker-manager's VM,
    # listed two to a page, once by the lean path and once by the SDK's own list operations.
    provider: AzureProvider = make_azure_provider(sim_arm, adopt_legacy=True)
    spot = {**launch_config(spot=True), "evictionPolicy": "Deallocate"}
    made = provider.create(batch(["w-run-1", "w-run-2"]))
    made += provider.create(batch(["w-spot"], spot))
    made += provider.create(batch(["w-stop"])) + provider.create(batch(["w-fail"]))
    assert all(r.cloud_id for r in made)
    by_worker = {r.worker_id: r.cloud_id for r in made}
    sim_arm.kill(by_worker["w-spot"])
    sim_arm.kill(by_worker["w-stop"])
    sim_arm.fail(by_worker["w-fail"])
    legacy_vm(
        "azure",
        sim_arm,
        provider_id=provider.id,
        pool_id="proj-ci/legacy",
        region=REGION,
        root_url=AZURE_ROOT_URL,
    )
    sim_arm.faults.behaviour.update(page_size_max=2)
    send = provider.clients.compute.send_request

    def lean(group: str | None, **params: Any) -> list[dict[str, Any]]:
        items, token = [], None
        while True:
            page, token = fetch_json_page(
                send, lambda: vm_list_request(AZURE_SUBSCRIPTION, group, **params), token
            )
            items += page
            if not token:
                return items

    with compute_client(sim_arm) as compute:
        group_models = list(compute.virtual_machines.list(AZURE_RESOURCE_GROUP))
        all_models = list(compute.virtual_machines.list_all())
        status_models = list(compute.virtual_machines.list_all(status_only="true"))

    # Outcome: the same VMs, page after page, with the same fields and statuses.
    for items, models in (
        (lean(AZURE_RESOURCE_GROUP), group_models),
        (lean(None), all_models),
    ):
        assert [i["id"] for i in items] == [m.id for m in models]
        assert [json_fields(i) for i in items] == [model_fields(m) for m in models]
    statuses = lean(None, status_only="true")
    assert [codes(json_statuses(i)) for i in statuses] == [
        codes(statuses_of(m)) for m in status_models
    ]
    assert len(group_models) == 6  # wm's five and worker-manager's
    # And the scan's instances: the lean listing's against those built from the SDK's models.
    views = {m.id.lower(): m.properties.instance_view for m in status_models}
    from_models = {}
    for model in group_models:
        instance = provider._any_instance(model, views[model.id.lower()], REGION)
        assert instance is not None
        from_models[instance.worker_id] = instance
    listed = provider.list_groups(REGION, [AZURE_RESOURCE_GROUP])
    assert {i.worker_id: i for i in listed} == from_models
    assert {i.worker_id: i.state.value for i in listed if not i.legacy} == {
        "w-run-1": "running",
        "w-run-2": "running",
        "w-spot": "stopped",
        "w-stop": "stopped",
        "w-fail": "stopped",
    }


@pytest.mark.parametrize("fate", ["throttle", "fail"])
def test_a_failed_list_raises_what_the_sdks_list_raises(
    sim_arm: SimArm, azure_provider: AzureProvider, fate: str
):
    # Scenario: a resource group's list answered by a 429 (with its Retry-After), or a 5xx.
    sim_arm.faults.behaviour.update(retry_after_s=0.5)
    sim_arm.faults.force(fate, fate, operation="VirtualMachines_List")
    send = azure_provider.clients.compute.send_request
    with pytest.raises(HttpResponseError) as lean_error:
        fetch_json_page(
            send, lambda: vm_list_request(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP), None
        )
    with compute_client(sim_arm) as compute, pytest.raises(HttpResponseError) as sdk_error:
        list(compute.virtual_machines.list(AZURE_RESOURCE_GROUP))

    # Outcome: the same exception class, status and error, and the same CloudError for the gate.
    assert type(lean_error.value) is type(sdk_error.value)
    assert lean_error.value.status_code == sdk_error.value.status_code
    assert codes_of(lean_error.value) == codes_of(sdk_error.value)
    assert as_classified(lean_error.value) == as_classified(sdk_error.value)


def codes_of(error: HttpResponseError) -> tuple[Any, Any]:
    return (error.error.code, error.error.message) if error.error is not None else (None, None)


def as_classified(error: HttpResponseError) -> tuple[Any, ...]:
    found = classify("p", error)
    return (found.category, found.code, found.message, found.retry_after_s)
