"""wm PUTs a VM as the SDK's own request and reads the answer's JSON (wm/providers/azure/
vm_put.py): against the simulated ARM, what it keeps of a VM is what the SDK's model holds for
that VM, the request is the SDK's, and a refused PUT raises what the SDK's PUT raises, classified
the same."""

from __future__ import annotations

from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError

from tests.fixtures.sim_arm import AZURE_RESOURCE_GROUP, AZURE_SUBSCRIPTION, compute_client
from tests.integration.clouds.test_azure import preloaded_body
from wm.providers.azure.errors import classify
from wm.providers.azure.names import computer_name
from wm.providers.azure.provider import AzureProvider
from wm.providers.azure.vm_put import put_vm
from wmsim.azure.arm import SimArm


def lean_put(provider: AzureProvider, name: str, body: dict[str, Any]):
    send = provider.clients.compute.send_request
    return put_vm(send, AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, name, body)


def sdk_put(sim_arm: SimArm, name: str, body: dict[str, Any]):
    with compute_client(sim_arm) as compute:
        poller = compute.virtual_machines.begin_create_or_update(
            AZURE_RESOURCE_GROUP, name, body, polling=False
        )
        return poller.result()


def test_a_lean_put_keeps_what_the_sdks_model_of_the_same_vm_holds(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    put = lean_put(azure_provider, "vm-wlean", preloaded_body("wlean", {"a": "b"}))

    with compute_client(sim_arm) as compute:
        model = compute.virtual_machines.get(AZURE_RESOURCE_GROUP, "vm-wlean")
    assert (put.id, put.name, put.vm_id) == (model.id, model.name, model.properties.vm_id)
    assert put.vm_id  # ARM gives every VM one


def test_the_lean_put_sends_the_body_the_sdks_put_sends(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    lean = lean_put(azure_provider, "vm-wbody1", preloaded_body("wbody1", {"a": "b"}))
    sdk = sdk_put(sim_arm, "vm-wbody2", preloaded_body("wbody2", {"a": "b"}))

    with compute_client(sim_arm) as compute:
        made = [
            compute.virtual_machines.get(AZURE_RESOURCE_GROUP, name).as_dict()
            for name in ("vm-wbody1", "vm-wbody2")
        ]
    # The two VMs differ in what is named after their workers and what ARM stamps, nothing else
    # they were sent.
    assert same_but_names(made[0], "wbody1") == same_but_names(made[1], "wbody2")
    assert lean.name == "vm-wbody1" and sdk.name == "vm-wbody2"


@pytest.mark.parametrize("fate", ["throttle", "fail", "conflict"])
def test_a_refused_put_raises_what_the_sdks_put_raises(
    sim_arm: SimArm, azure_provider: AzureProvider, fate: str
):
    # Scenario: a PUT answered by a 429 (with its Retry-After), a 5xx, or ARM's 409 for a VM
    # that exists already (its admin password may not change).
    body = preloaded_body("wrefused", {})
    if fate == "conflict":
        sdk_put(sim_arm, "vm-wrefused", body)
        body["properties"]["osProfile"]["adminPassword"] = "Wm-9another"
    else:
        sim_arm.faults.behaviour.update(retry_after_s=0.5)
        sim_arm.faults.force(fate, fate, operation="VirtualMachines_CreateOrUpdate")
    with pytest.raises(HttpResponseError) as lean_error:
        lean_put(azure_provider, "vm-wrefused", body)
    with pytest.raises(HttpResponseError) as sdk_error:
        sdk_put(sim_arm, "vm-wrefused", body)

    # Outcome: the same exception class, status and error, and the same CloudError for the gate.
    assert type(lean_error.value) is type(sdk_error.value)
    assert lean_error.value.status_code == sdk_error.value.status_code
    assert as_classified(lean_error.value) == as_classified(sdk_error.value)
    if fate == "conflict":
        assert classify("p", lean_error.value).code == "PropertyChangeNotAllowed"


def same_but_names(value: Any, worker: str) -> Any:
    """The value with its worker's name and ARM's stamps (its ids, times) blanked."""
    if isinstance(value, dict):
        return {
            k: None if "id" in k.lower() or "time" in k.lower() else same_but_names(v, worker)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [same_but_names(v, worker) for v in value]
    if isinstance(value, str):
        return value.replace(worker, "*").replace(computer_name(worker), "*")
    return value


def as_classified(error: HttpResponseError) -> tuple[Any, ...]:
    found = classify("p", error)
    return (found.category, found.code, found.message, found.retry_after_s)
