"""Each provider kind's parts, in full: what a worker is told at boot, the worker group a
launch config names, the warnings and problems a definition gets, the tags and labels."""

from __future__ import annotations

import base64
import json

import pytest

from wm.kinds import KINDS, aws, azure, gcp, static
from wm.kinds.base import BootFacts

ROOT = "https://tc.example.com"
FACTS = BootFacts(
    root_url=ROOT,
    pool_id="proj/linux",
    provider_id="prov",
    worker_group="zone-1",
    launch_config_id="lc-1",
    worker_config={"a": 1},
    owner="ci@example.com",
)


@pytest.mark.parametrize(
    ("kind", "boot"),
    [
        (
            "aws",  # the instance's user data
            {
                "rootUrl": ROOT,
                "workerPoolId": "proj/linux",
                "providerId": "prov",
                "workerGroup": "zone-1",
                "launchConfigId": "lc-1",
                "workerConfig": {"a": 1},
            },
        ),
        (
            "gcp",  # the `taskcluster` metadata item
            {
                "workerPoolId": "proj/linux",
                "providerId": "prov",
                "workerGroup": "zone-1",
                "rootUrl": ROOT,
                "workerConfig": {"a": 1},
            },
        ),
        (
            "azure",  # the VM's tags, read from IMDS
            {
                "worker-pool-id": "proj/linux",
                "provider-id": "prov",
                "worker-group": "zone-1",
                "root-url": ROOT,
                "created-by": "taskcluster-wm-prov",
                "managed-by": "taskcluster",
                "owner": "ci@example.com",
                "launch-config-id": "lc-1",
            },
        ),
        (
            "static",  # worker-runner's static provider config, written by the operator
            {
                "providerType": "static",
                "rootURL": ROOT,
                "providerID": "prov",
                "workerPoolID": "proj/linux",
                "workerGroup": "zone-1",
            },
        ),
    ],
)
def test_what_a_worker_is_told_at_boot(kind, boot):
    assert dict(KINDS[kind].boot_data(FACTS)) == boot


ARM = {"armDeployment": {"parameters": {"location": {"value": "westus"}}, "template": {}}}


@pytest.mark.parametrize(
    ("kind", "launch_config", "guesses"),
    [
        ("aws", {"region": "us-east-1", "zone": "z"}, ("us-east-1",)),
        ("gcp", {"zone": "us-central1-a", "region": "r"}, ("us-central1-a",)),
        ("azure", {"location": "eastus"}, ("eastus", None)),
        ("azure", ARM, (None, "westus")),
        ("static", {"location": "x"}, ()),
    ],
)
def test_where_a_pool_whose_provider_is_gone_guesses_its_worker_groups(
    kind, launch_config, guesses
):
    assert KINDS[kind].worker_group_guesses(launch_config) == guesses


@pytest.mark.parametrize(
    ("kind", "launch_config", "template"),
    [
        ("aws", ARM, False),
        ("gcp", ARM, False),
        ("static", ARM, False),
        ("azure", ARM, True),
        ("azure", {"location": "eastus"}, False),
        ("azure", {"armDeployment": None}, False),
    ],
)
def test_only_azure_launches_a_template_and_only_when_it_has_one(kind, launch_config, template):
    assert KINDS[kind].template_form(launch_config) is template


@pytest.mark.parametrize(
    ("scenario", "kind", "launch_config", "warnings"),
    [
        (
            "every RunInstances key wm sets, and the launch config id",
            "aws",
            {
                "launchConfig": {
                    "ImageId": "a",
                    "UserData": "x",
                    "MinCount": 2,
                    "ClientToken": "t",
                },
                "additionalUserData": {"launchConfigId": "mine"},
            },
            [
                "lc.launchConfig.UserData: ignored: wm sets it",
                "lc.launchConfig.MinCount: ignored: wm sets it",
                "lc.launchConfig.ClientToken: ignored: wm sets it",
                "lc.additionalUserData.launchConfigId: ignored: wm sets it",
            ],
        ),
        (
            "the launch config id alone",
            "aws",
            {"launchConfig": {"ImageId": "a"}, "additionalUserData": {"launchConfigId": "x"}},
            ["lc.additionalUserData.launchConfigId: ignored: wm sets it"],
        ),
        ("nothing wm sets", "aws", {"launchConfig": {"ImageId": "a"}}, []),
        (
            "an ARM deployment without a location value",
            "azure",
            {"armDeployment": {"parameters": {"location": {"reference": "x"}}}},
            [
                "lc.armDeployment.parameters.location: no string value; worker-manager takes "
                "the worker group from parameters.location.value"
            ],
        ),
        ("an ARM deployment with its location", "azure", ARM, []),
        ("the resource form", "azure", {"location": "eastus"}, []),
    ],
)
def test_what_a_definition_is_warned_of(scenario, kind, launch_config, warnings):
    assert KINDS[kind].override_warnings(launch_config, "lc") == warnings, scenario


def test_an_inline_template_missing_a_parameter_wm_sets_is_a_problem_naming_all_of_them():
    declared = {name: {} for name in azure.ARM_INJECTED_PARAMETERS if name != "vmName"}
    launch_config = {"armDeployment": {"template": {"parameters": declared}}}
    assert azure.undeclared_template_parameters(launch_config, "lc") == [
        "lc.armDeployment.template.parameters.vmName: not declared; worker-manager sets this "
        f"parameter in every deployment ({', '.join(azure.ARM_INJECTED_PARAMETERS)})"
    ]


def test_the_arm_parameters_wm_sets_are_each_a_value():
    parameters = azure.azure_arm_parameters(
        tags={"t": "1"},
        vm_name="vm",
        computer_name="pc",
        admin_username="u",
        admin_password="p",
        custom_data="c",
    )
    assert parameters == {
        "tags": {"value": {"t": "1"}},
        "vmName": {"value": "vm"},
        "computerName": {"value": "pc"},
        "adminUsername": {"value": "u"},
        "adminPassword": {"value": "p"},
        "customData": {"value": "c"},
    }


def test_ec2_tags_are_worker_managers_in_its_order():
    assert aws.ec2_tags(pool_id="proj/linux", provider_id="prov", owner="o@x") == [
        {"Key": "CreatedBy", "Value": "taskcluster-wm-prov"},
        {"Key": "Owner", "Value": "o@x"},
        {"Key": "ManagedBy", "Value": "taskcluster"},
        {"Key": "Name", "Value": "proj/linux"},
        {"Key": "WorkerPoolId", "Value": "proj/linux"},
    ]


@pytest.mark.parametrize(
    ("scenario", "launch_config_id", "owner", "labels"),
    [
        (
            "values made to fit GCE's label rule",
            "lc-1",
            "CI@Example.com",
            {
                "created-by": "taskcluster-wm-gcp-1",
                "managed-by": "taskcluster",
                "worker-pool-id": "proj-linux",
                "owner": "ci-example-com",
                "launch-config-id": "lc-1",
            },
        ),
        (
            "no owner, a launch config id GCE takes as it is",
            "lc_1",
            None,
            {
                "created-by": "taskcluster-wm-gcp-1",
                "managed-by": "taskcluster",
                "worker-pool-id": "proj-linux",
                "owner": "",
                "launch-config-id": "lc_1",
            },
        ),
        (
            "a launch config id GCE would refuse",
            "LC/1",
            "",
            {
                "created-by": "taskcluster-wm-gcp-1",
                "managed-by": "taskcluster",
                "worker-pool-id": "proj-linux",
                "owner": "",
                "launch-config-id": "lc-1",
            },
        ),
    ],
)
def test_gce_labels_in_full(scenario, launch_config_id, owner, labels):
    given = {} if owner is None else {"owner": owner}
    got = gcp.gce_labels(
        pool_id="proj/linux", provider_id="gcp_1", launch_config_id=launch_config_id, **given
    )
    assert got == labels, scenario


def test_a_gce_label_is_at_most_63_characters():
    assert (
        len(
            gcp.gce_labels(pool_id="p/" + "x" * 80, provider_id="g", launch_config_id="l")[
                "worker-pool-id"
            ]
        )
        == 63
    )


def test_azure_custom_data_is_standard_base64_of_worker_managers_json():
    custom = azure.azure_custom_data(root_url=ROOT, pool_id="p/q", provider_id="az", location="l")
    assert (
        base64.b64decode(custom, validate=True)
        == json.dumps(
            {
                "workerPoolId": "p/q",
                "workerGroup": "l",
                "providerId": "az",
                "rootUrl": ROOT,
                "workerConfig": {},
            }
        ).encode()
    )


def test_a_static_worker_has_no_worker_group_of_its_pool():
    assert static.worker_group({"location": "x"}) is None
