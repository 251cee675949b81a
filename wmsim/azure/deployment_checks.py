"""What ARM reads and checks of a deployment PUT before it answers (deployments.py's module
docstring): the template (inline, a template spec version's, or fetched from templateLink.uri),
the parameter values, the mode, and the preflight of the planned resources (names, Windows
computer names). Refusals are ArmErrors in ARM's codes.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

from wmsim.azure.arm_templates import Plan, PlannedResource
from wmsim.azure.errors import ArmError
from wmsim.azure.resources import VM_TYPE, as_object

RESOURCE_NAME_MAX = 80
WINDOWS_COMPUTER_NAME_MAX = 15
TEMPLATE_FETCH_TIMEOUT_S = 5.0
# templateLink.uri is fetched only from these hosts: tests serve templates from 127.0.0.1.
TEMPLATE_URI_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
MODES = {"incremental": "Incremental", "complete": "Complete"}
ARM_DEPLOY_HELP = "Please see https://aka.ms/arm-deploy for usage details."

SpecTemplate = Callable[[str], dict[str, Any] | None]  # version id -> its mainTemplate
SecretLookup = Callable[[str, dict[str, Any]], str]  # (parameter, reference) -> the secret


def deployment_template(
    props: dict[str, Any], main_template: SpecTemplate
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The template to deploy and the templateLink ARM echoes (None when inline);
    `main_template` finds a template spec version's."""
    inline, link = props.get("template"), props.get("templateLink")
    if (inline is None) == (link is None):
        raise ArmError(
            400,
            "InvalidDeployment",
            "The deployment definition is invalid; exactly one of 'template' and "
            "'templateLink' must be given.",
        )
    if props.get("parametersLink") is not None:
        raise ArmError(
            400,
            "InvalidDeployment",
            "The deployment definition is invalid; 'parametersLink' is not supported by the "
            "simulated ARM: give 'parameters'.",
        )
    if inline is not None:
        if not isinstance(inline, dict):
            raise content_error("The 'template' property must be an object.")
        return copy.deepcopy(inline), None
    link = as_object(link)
    if bool(link.get("id")) == bool(link.get("uri")):
        raise ArmError(
            400,
            "InvalidDeployment",
            "The deployment definition is invalid; templateLink must have exactly one of "
            "'id' and 'uri'.",
        )
    template = _linked_template(link, main_template)
    echo = {k: v for k, v in link.items() if k in ("id", "uri", "queryString")}
    echo["contentVersion"] = str(template.get("contentVersion") or "1.0.0.0")
    return template, echo


def _linked_template(link: dict[str, Any], main_template: SpecTemplate) -> dict[str, Any]:
    if link.get("id"):
        template = main_template(str(link["id"]))
        if template is None:
            raise ArmError(
                400,
                "InvalidTemplateSpec",
                "Unable to retrieve the template content from the resource ID "
                f"'{link['id']}'. {ARM_DEPLOY_HELP}",
            )
        return template
    uri = str(link["uri"])
    if link.get("queryString"):
        uri += ("&" if "?" in uri else "?") + str(link["queryString"]).lstrip("?")
    return fetch_template(uri)


def parameter_values(props: dict[str, Any], secret: SecretLookup) -> dict[str, Any]:
    """The deployment's parameter values, Key Vault references resolved through `secret`."""
    given = props.get("parameters") or {}
    if not isinstance(given, dict):
        raise content_error("The 'parameters' property must be an object.")
    values: dict[str, Any] = {}
    for name, entry in given.items():
        entry = as_object(entry)
        if "value" in entry:
            values[name] = entry["value"]
        elif isinstance(entry.get("reference"), dict):
            values[name] = secret(name, entry["reference"])
        else:
            raise ArmError(
                400,
                "InvalidDeploymentParameterValue",
                f"The value of deployment parameter '{name}' is null. Please specify the "
                "value or use the parameter reference. See https://aka.ms/arm-deploy/"
                "#parameter-file for details.",
            )
    return values


def content_error(detail: str) -> ArmError:
    return ArmError(
        400,
        "InvalidRequestContent",
        f"The request content was invalid and could not be deserialized: '{detail}'",
    )


def deployment_mode(props: dict[str, Any]) -> str:
    mode = props.get("mode")
    if mode is None:
        raise content_error("Required property 'mode' not found in JSON. Path 'properties'.")
    found = MODES.get(str(mode).lower())
    if found is None:
        raise content_error(
            f"Error converting value \"{mode}\" to type 'DeploymentMode'. Path 'properties.mode'."
        )
    return found  # Complete is run as Incremental: the sim never deletes what is not listed


def fetch_template(uri: str) -> dict[str, Any]:
    """A template from templateLink.uri: only from this machine (TEMPLATE_URI_HOSTS)."""
    failed = ArmError(
        400,
        "InvalidContentLink",
        f"Unable to download deployment content from '{uri}'. The tracking Id is "
        f"'{uuid.uuid4()}'. {ARM_DEPLOY_HELP}",
    )
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https") or parts.hostname not in TEMPLATE_URI_HOSTS:
        raise failed
    # No proxies: the template server is on this machine.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(uri, timeout=TEMPLATE_FETCH_TIMEOUT_S) as reply:
            content = reply.read()
    except (urllib.error.URLError, OSError, ValueError):
        raise failed from None
    try:
        template = json.loads(content)
    except ValueError:
        template = None
    if not isinstance(template, dict):
        raise ArmError(
            400,
            "InvalidTemplate",
            f"Deployment template parse failed: the content of '{uri}' is not a JSON object.",
        )
    return template


def preflight(name: str, planned: Plan) -> None:
    """What ARM's preflight validation refuses before deploying: 400
    InvalidTemplateDeployment with one inner error per problem."""
    problems = []
    for resource in planned.resources:
        for segment in resource.name.split("/"):
            if not _valid_name(segment):
                problems.append(
                    {
                        "code": "InvalidResourceName",
                        "target": resource.id,
                        "message": f"Resource name {segment} is invalid. The name can be up to "
                        f"{RESOURCE_NAME_MAX} characters long. It must begin with a word "
                        "character, and it must end with a word character or with '_'. The "
                        "name may contain word characters or '.', '-', '_'.",
                    }
                )
        if resource.type.lower() == VM_TYPE.lower():
            problems.extend(_computer_name_problems(resource))
    if problems:
        raise ArmError(
            400,
            "InvalidTemplateDeployment",
            f"The template deployment '{name}' is not valid according to the validation "
            f"procedure. The tracking id is '{uuid.uuid4()}'. See inner errors for details.",
            details=problems,
        )


def _valid_name(name: str) -> bool:
    if not 0 < len(name) <= RESOURCE_NAME_MAX:
        return False
    if not (name[0].isalnum() or name[0] == "_") or not (name[-1].isalnum() or name[-1] == "_"):
        return False
    return all(c.isalnum() or c in "._-" for c in name)


def _computer_name_problems(vm: PlannedResource) -> list[dict[str, Any]]:
    props = as_object(vm.body.get("properties"))
    os_profile = as_object(props.get("osProfile"))
    computer = os_profile.get("computerName")
    os_type = str(as_object(as_object(props.get("storageProfile")).get("osDisk")).get("osType", ""))
    windows = "windowsConfiguration" in os_profile or os_type.lower() == "windows"
    if not windows or not isinstance(computer, str) or len(computer) <= WINDOWS_COMPUTER_NAME_MAX:
        return []
    return [
        {
            "code": "InvalidParameter",
            "target": "computerName",
            "message": "Windows computer name cannot be more than 15 characters long, be "
            "entirely numeric, or contain the following characters: ` ~ ! @ # $ % ^ & * ( ) "
            "= + _ [ ] { } \\ | ; : . ' \" , < > / ?.",
        }
    ]
