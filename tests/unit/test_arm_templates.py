"""The simulated ARM's template evaluator: expressions, parameters, resources and outputs."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from wmsim.azure.arm_templates import TemplateError, evaluate_outputs, plan
from wmsim.azure.template_evaluation import evaluate
from wmsim.azure.template_expressions import ExpressionError
from wmsim.azure.template_functions import Scope, unique_string
from wmsim.azure.templates import WORKER_TEMPLATE

SCOPE = Scope("sub-1", "rg-workers", "westeurope", "deploy-abc")
PREFIX = "/subscriptions/sub-1/resourceGroups/rg-workers/providers"
FIXTURE = WORKER_TEMPLATE
PARAMETERS = {
    "vmName": "vm-abc",
    "priority": "Spot",
    "tags": {"worker-pool-id": "proj/ci", "root-url": "https://tc.example"},
    "placement": "",
}
VARIABLES = {
    "nicName": "[concat(parameters('vmName'), '-nic')]",
    "nicId": "[resourceId('Microsoft.Network/networkInterfaces', variables('nicName'))]",
    "ipConfig": {"id": "[variables('nicId')]", "properties": {"deleteOption": "Delete"}},
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        ("[[not an expression]", "[not an expression]"),
        (7, 7),
        ("[concat('a', 'b', 'c')]", "abc"),
        ("[concat(parameters('vmName'), '-nic')]", "vm-abc-nic"),
        ("[concat(createArray(1), createArray(2, 3))]", [1, 2, 3]),
        ("[format('{0}-osdisk-{1}', parameters('vmName'), 2)]", "vm-abc-osdisk-2"),
        ("[format('{{{0}}}', 'x')]", "{x}"),
        ("['it''s']", "it's"),
        ("[parameters('VMNAME')]", "vm-abc"),  # ARM's names are case-insensitive
        ("[variables('nicName')]", "vm-abc-nic"),
        (
            "[variables('ipConfig')]",
            {
                "id": f"{PREFIX}/Microsoft.Network/networkInterfaces/vm-abc-nic",
                "properties": {"deleteOption": "Delete"},
            },
        ),
        (
            "[resourceId('Microsoft.Compute/virtualMachines', parameters('vmName'))]",
            f"{PREFIX}/Microsoft.Compute/virtualMachines/vm-abc",
        ),
        (
            "[resourceId('images-rg', 'Microsoft.Compute/images', 'win')]",
            "/subscriptions/sub-1/resourceGroups/images-rg/providers/Microsoft.Compute/images/win",
        ),
        (
            "[resourceId('sub-2', 'net', 'Microsoft.Network/virtualNetworks/subnets', 'v', 's')]",
            "/subscriptions/sub-2/resourceGroups/net/providers/Microsoft.Network/"
            "virtualNetworks/v/subnets/s",
        ),
        ("[resourceGroup().location]", "westeurope"),
        ("[resourceGroup().LOCATION]", "westeurope"),  # property access ignores case too
        ("[resourceGroup().name]", "rg-workers"),
        ("[resourceGroup().id]", "/subscriptions/sub-1/resourceGroups/rg-workers"),
        ("[subscription().subscriptionId]", "sub-1"),
        ("[subscription().id]", "/subscriptions/sub-1"),
        ("[deployment().name]", "deploy-abc"),
        ("[if(equals(parameters('priority'), 'Spot'), 'Delete', json('null'))]", "Delete"),
        ("[if(equals(parameters('priority'), 'Regular'), 'Delete', json('null'))]", None),
        ("[if(false(), json('not json'), 'only the branch taken')]", "only the branch taken"),
        ("[equals(createObject('a', 1), json('{\"a\": 1}'))]", True),
        ("[equals(1, '1')]", False),
        ("[not(equals(parameters('priority'), 'Spot'))]", False),
        ("[and(true(), not(false()))]", True),
        ("[or(false(), false())]", False),
        ("[empty(parameters('placement'))]", True),
        ("[empty(createObject())]", True),
        ("[empty(parameters('tags'))]", False),
        ("[length(parameters('tags'))]", 2),
        ("[contains(parameters('tags'), 'ROOT-URL')]", True),
        ("[coalesce(json('null'), 'fallback')]", "fallback"),
        ("[toLower('StandardSSD_LRS')]", "standardssd_lrs"),
        ("[toUpper('spot')]", "SPOT"),
        ("[string(5)]", "5"),
        ("[string(true())]", "True"),
        ("[string(createObject('a', 1))]", '{"a":1}'),
        ("[int('42')]", 42),
        ("[bool('true')]", True),
        ("[json('{\"a\": [1, 2]}').a[1]]", 2),
        ("[json('null')]", None),
        ("[createObject('maxPrice', -1)]", {"maxPrice": -1}),
        (
            "[union(createObject('option', 'Local'), if(empty(parameters('placement')), "
            "createObject(), createObject('placement', parameters('placement'))))]",
            {"option": "Local"},
        ),
        (
            '[json(concat(\'{"option": "Local", "placement": "\', \'NvmeDisk\', \'"}\'))]',
            {"option": "Local", "placement": "NvmeDisk"},
        ),
        ("[union(createArray(1, 2), createArray(2, 3))]", [1, 2, 3]),
        ("[base64('{}')]", "e30="),
        ("[base64ToString('e30=')]", "{}"),
        ("[parameters('tags')['worker-pool-id']]", "proj/ci"),
        (
            {"tags": "[parameters('tags')]", "list": ["[parameters('vmName')]", 1]},
            {"tags": PARAMETERS["tags"], "list": ["vm-abc", 1]},
        ),
    ],
)
def test_an_expression_evaluates_as_arm_evaluates_it(value: Any, expected: Any):
    assert evaluate(value, SCOPE, PARAMETERS, VARIABLES) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[frobnicate('x')]", "The template function 'frobnicate' is not valid."),
        ("[parameters('nope')]", "The template parameter 'nope' is not found."),
        ("[variables('nope')]", "The template variable 'nope' is not found."),
        ("[resourceGroup().]", "ends too early"),
        ("[concat('a', ))]", "unexpected ')'"),
        ("[concat('a') extra]", "unexpected"),
        ("[concat('a' 'b')]", "expected ',' or ')'"),
        ("[concat('a', createObject())]", "either all strings or all arrays"),
        ("[json('{')]", "is not JSON"),
        ("[createObject('a')]", "even number of arguments"),
        ("[resourceGroup().nope]", "property 'nope' doesn't exist"),
        ("[createArray(1)[3]]", "array index '3' is out of bounds"),
        ("[if('yes', 1, 2)]", "expects a boolean condition"),
        ("[if(true(), 1)]", "must have 3 argument(s)"),
        ("[resourceId('rg', 'nic-1')]", "no resource type"),
        ("[resourceId('Microsoft.Network/virtualNetworks/subnets', 'v')]", "requires '2'"),
        ("[reference('nic-1')]", "only supported in outputs"),
        ("[int('forty')]", "cannot convert"),
        ("[toLower(5)]", "of type 'Integer'"),
    ],
)
def test_an_expression_arm_refuses_is_an_error_naming_why(value: str, message: str):
    with pytest.raises(ExpressionError, match=message_pattern(message)):
        evaluate(value, SCOPE, PARAMETERS, VARIABLES)


def message_pattern(text: str) -> str:
    return re.escape(text)


def test_unique_string_is_13_stable_lower_case_characters():
    first = evaluate("[uniqueString(resourceGroup().id, 'vm')]", SCOPE)
    assert first == unique_string("/subscriptions/sub-1/resourceGroups/rg-workers", "vm")
    assert len(first) == 13 and first.isalnum() and first == first.lower()
    assert evaluate("[uniqueString('other')]", SCOPE) != first


# -- parameters ---------------------------------------------------------------------------------


def template_with(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"parameters": parameters, "resources": []}


DECLARED = {
    "vmName": {"type": "string"},
    "location": {"type": "string", "defaultValue": "[resourceGroup().location]"},
    "priority": {"type": "string", "defaultValue": "Spot", "allowedValues": ["Regular", "Spot"]},
    "count": {"type": "int", "defaultValue": 1, "minValue": 1, "maxValue": 4},
    "public": {"type": "bool", "defaultValue": False},
    "tags": {"type": "object", "defaultValue": {}},
    "password": {"type": "securestring", "defaultValue": ""},
    "suffix": {"type": "string", "defaultValue": "[concat(parameters('vmName'), '-x')]"},
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"vmName": "vm-1"},
            {
                "vmName": "vm-1",
                "location": "westeurope",  # a default may be an expression
                "priority": "Spot",
                "count": 1,
                "public": False,
                "tags": {},
                "password": "",
                "suffix": "vm-1-x",  # ... and may read the parameters before it
            },
        ),
        (
            {"VMNAME": "vm-2", "priority": "Regular", "count": 4, "public": True},
            {"vmName": "vm-2", "priority": "Regular", "count": 4, "public": True},
        ),
        # An allowed value in another case: ARM takes it, as given.
        ({"vmName": "vm-3", "priority": "spot"}, {"vmName": "vm-3", "priority": "spot"}),
    ],
)
def test_parameters_take_the_values_given_and_the_defaults_of_the_others(
    given: dict[str, Any], expected: dict[str, Any]
):
    planned = plan(template_with(DECLARED), given, SCOPE)

    assert {k: planned.parameters[k] for k in expected} == expected
    assert planned.parameter_types["password"] == "SecureString"
    assert planned.parameter_types["count"] == "Int"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "The value for the template parameter 'vmName' is not provided."),
        (
            {"vmName": "v", "vmSize": "x"},
            "The template parameters 'vmSize' in the parameters file are not valid",
        ),
        (
            {"vmName": 5},
            "Expected a value of type 'String', but received a value of type 'Integer'",
        ),
        ({"vmName": "v", "count": "2"}, "Expected a value of type 'Int'"),
        ({"vmName": "v", "count": True}, "Expected a value of type 'Int'"),
        ({"vmName": "v", "public": "true"}, "Expected a value of type 'Bool'"),
        ({"vmName": "v", "tags": []}, "Expected a value of type 'Object'"),
        (
            {"vmName": "v", "priority": "Low"},
            "The parameter value is not part of the allowed value(s): 'Regular,Spot'",
        ),
        ({"vmName": "v", "count": 9}, "greater than the maxValue of 4"),
        ({"vmName": "v", "count": 0}, "less than the minValue of 1"),
    ],
)
def test_parameters_arm_refuses_are_invalid_template(given: dict[str, Any], message: str):
    with pytest.raises(TemplateError, match=message_pattern(message)) as refused:
        plan(template_with(DECLARED), given, SCOPE)
    assert refused.value.code == "InvalidTemplate"
    assert refused.value.message.startswith("Deployment template validation failed: '")


# -- resources ----------------------------------------------------------------------------------


def resource(rtype: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"type": rtype, "apiVersion": "2023-05-01", "name": name, **extra}


IP = "Microsoft.Network/publicIPAddresses"
NIC = "Microsoft.Network/networkInterfaces"
VM = "Microsoft.Compute/virtualMachines"


def names(template: dict[str, Any], parameters: dict[str, Any] | None = None) -> list[str]:
    return [r.name for r in plan(template, parameters or {}, SCOPE).resources]


def test_resources_are_ordered_by_their_dependencies_whatever_their_order_in_the_template():
    template = {
        "resources": [
            resource(VM, "vm", dependsOn=[f"[resourceId('{NIC}', 'nic')]"]),
            resource(NIC, "nic", dependsOn=[f"{IP}/ip"]),  # by type/name
            resource(IP, "ip"),
            resource(NIC, "other", dependsOn=["ip"]),  # by name alone
        ]
    }

    planned = plan(template, {}, SCOPE)

    assert [r.name for r in planned.resources] == ["ip", "nic", "vm", "other"]
    by_name = {r.name: r for r in planned.resources}
    assert by_name["vm"].depends_on == (f"{PREFIX}/{NIC}/nic",)
    assert by_name["vm"].id == f"{PREFIX}/{VM}/vm"


def test_a_resource_whose_condition_is_false_is_skipped_and_dependencies_on_it_dropped():
    template = {
        "parameters": {"createIp": {"type": "bool", "defaultValue": False}},
        "resources": [
            resource(IP, "ip", condition="[parameters('createIp')]"),
            resource(NIC, "nic", dependsOn=[f"[resourceId('{IP}', 'ip')]", ""]),
        ],
    }

    without = plan(template, {}, SCOPE)
    with_ip = plan(template, {"createIp": True}, SCOPE)

    assert [r.name for r in without.resources] == ["nic"]
    assert without.skipped == (f"{PREFIX}/{IP}/ip",)
    assert without.resources[0].depends_on == ()
    assert [r.name for r in with_ip.resources] == ["ip", "nic"]


def test_a_resource_body_is_evaluated_without_its_template_keywords():
    template = {
        "parameters": {"tags": {"type": "object"}},
        "resources": [
            resource(
                IP,
                "ip",
                location="[resourceGroup().location]",
                tags="[parameters('tags')]",
                sku={"name": "Standard"},
                properties={"publicIPAllocationMethod": "Static"},
                comments="ignored",
            )
        ],
    }

    [ip] = plan(template, {"tags": {"a": "b"}}, SCOPE).resources

    assert dict(ip.body) == {
        "location": "westeurope",
        "tags": {"a": "b"},
        "sku": {"name": "Standard"},
        "properties": {"publicIPAllocationMethod": "Static"},
    }
    assert ip.api_version == "2023-05-01"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (
            {"resources": [resource(NIC, "nic", dependsOn=["missing"])]},
            "The resource 'missing' is not defined in the template.",
        ),
        (
            {
                "resources": [
                    resource(NIC, "a", dependsOn=["b"]),
                    resource(NIC, "b", dependsOn=["a"]),
                ]
            },
            "Circular dependency detected on resource",
        ),
        (
            {"resources": [resource(NIC, "a"), resource(NIC, "a")]},
            "is defined multiple times in a template",
        ),
        ({"resources": [resource(NIC, "a", copy={"count": 2})]}, "copy loops"),
        ({"resources": [resource(NIC, "a", resources=[])]}, "nested child resources"),
        ({"resources": [{"type": NIC, "name": "a"}]}, "must have a 'apiVersion' property"),
        (
            {"resources": [resource(NIC, "a", properties={"x": "[if(true(), 1, nope())]"})]},
            "The template function 'nope' is not valid.",  # even in a branch never taken
        ),
        ({"resources": [resource(NIC, "[parameters('x')]")]}, "parameter 'x' is not found"),
        (
            {"resources": [], "outputs": {"o": {"type": "string", "value": "[nope()]"}}},
            "The template function 'nope' is not valid.",
        ),
        ({"resources": [], "variables": {"v": "[concat('a',]"}}, "ends too early"),
        ({"resources": {}}, "'resources' section must be an array"),
        ({"resources": [], "functions": [{"namespace": "x"}]}, "user-defined functions"),
    ],
)
def test_a_template_arm_refuses_is_invalid_template(template: dict[str, Any], message: str):
    with pytest.raises(TemplateError, match=message_pattern(message)):
        plan(template, {}, SCOPE)


# -- the worker template fixture ----------------------------------------------------------------

WORKER = {
    "vmName": "vm-w1",
    "computerName": "w1",
    "adminUsername": "wmadmin",
    "adminPassword": "Secret-123",
    "customData": "e30=",
    "tags": {"worker-pool-id": "proj/ci"},
    "imageId": "/subscriptions/sub-1/resourceGroups/img/providers/Microsoft.Compute/images/w",
    "subnetId": f"{PREFIX}/Microsoft.Network/virtualNetworks/v/subnets/s",
}


def worker_template() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def test_the_worker_template_makes_a_nic_and_a_vm_with_the_injected_parameters():
    planned = plan(worker_template(), WORKER, SCOPE)

    assert [r.type for r in planned.resources] == [NIC, VM]
    nic, vm = planned.resources
    props = vm.body["properties"]
    assert vm.name == "vm-w1" and vm.body["tags"] == {"worker-pool-id": "proj/ci"}
    assert props["osProfile"]["computerName"] == "w1"
    assert props["osProfile"]["customData"] == "e30="
    assert props["osProfile"]["adminPassword"] == "Secret-123"
    assert props["priority"] == "Spot" and props["evictionPolicy"] == "Delete"
    assert props["billingProfile"] == {"maxPrice": -1}
    assert props["storageProfile"]["osDisk"]["diffDiskSettings"] == {"option": "Local"}
    assert props["storageProfile"]["dataDisks"] == []
    assert props["networkProfile"]["networkInterfaces"][0]["id"] == nic.id
    assert nic.body["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"] is None
    assert planned.parameters["location"] == "westeurope"  # the resource group's


def test_the_worker_template_with_a_public_ip_and_a_data_disk_makes_all_four():
    planned = plan(
        worker_template(),
        {**WORKER, "createPublicIp": True, "dataDiskSizeGB": 32, "priority": "Regular"},
        SCOPE,
    )

    assert [r.type for r in planned.resources] == [IP, NIC, "Microsoft.Compute/disks", VM]
    vm = planned.resources[-1]
    assert vm.body["properties"]["evictionPolicy"] is None  # json('null'): unset
    assert vm.body["properties"]["storageProfile"]["dataDisks"][0]["managedDisk"]["id"] == (
        f"{PREFIX}/Microsoft.Compute/disks/vm-w1-data"
    )


def test_outputs_read_deployed_resources_through_reference():
    template = worker_template()
    planned = plan(template, WORKER, SCOPE)
    asked: list[tuple[str, bool]] = []

    def reference(rid: str, full: bool) -> dict[str, Any]:
        asked.append((rid, full))
        return {"ipConfigurations": [{"properties": {"privateIPAddress": "10.0.0.9"}}]}

    outputs = evaluate_outputs(copy.deepcopy(template), planned, SCOPE, reference)

    assert outputs["resourceIds"]["type"] == "Object"
    value = outputs["resourceIds"]["value"]
    assert value["privateIp"] == "10.0.0.9"
    assert value["vm"] == f"{PREFIX}/{VM}/vm-w1"
    assert value["publicIp"] == ""
    assert asked == [(f"{PREFIX}/{NIC}/vm-w1-nic", False)]
