"""ARM template evaluation for the simulated ARM: the subset Taskcluster worker templates use.

Pure: a template, the deployment's parameter values and its scope go in; the resources to
create, in dependency order, come out (`plan`), and a finished deployment's outputs
(`evaluate_outputs`, which reads deployed resources through a `reference` callback). This
module checks parameters, declares resources and orders them; the expression language lives
beside it: its syntax in template_expressions.py, its functions (and the deployment's
`Scope`) in template_functions.py, evaluation in template_evaluation.py.

What it covers, from the worker templates in use (mozilla-platform-ops/relops_infra_as_code
terraform/azure_*fxci/template_specs/taskcluster-arm-template-*.json, the template specs
fxci-config's Azure pools name by templateLink.id) and issue 20's list:
- parameters with `type`, `defaultValue` (an expression too), `allowedValues`, min/max
  length and value; `variables` (objects holding expressions too), evaluated on demand;
- expressions `[...]` (`[[` escapes a literal `[`) with string and integer literals,
  property access (`.name`, case-insensitive as ARM's) and indexing (`[0]`);
- functions: parameters, variables, concat, format, resourceId, resourceGroup, subscription,
  deployment, uniqueString, if, equals, not, and, or, empty, coalesce, contains, length,
  toLower, toUpper, string, int, bool, json, createObject, createArray, union, true, false, null,
  base64, base64ToString, reference (in outputs);
- resources: `condition`, `dependsOn` (resource ids, `type/name` or names; a dependency on
  a resource whose condition is false, or an empty string, is dropped as ARM drops it).
Not covered, refused as InvalidTemplate naming the gap: copy loops (no worker template uses
them), nested child `resources`, user-defined `functions`, symbolic-name resources
(languageVersion 2.0), reference() outside outputs.

uniqueString is deterministic and 13 characters of [a-z0-7] like ARM's, but not ARM's own
hash: the sim never needs to agree with Azure on its values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wmsim.azure.template_evaluation import EvaluationContext, evaluate_value
from wmsim.azure.template_expressions import ExpressionError, calls, is_expression, parse_expression
from wmsim.azure.template_functions import (
    KNOWN_FUNCTIONS,
    Reference,
    Scope,
    resource_id,
    to_string,
    type_and_name,
    type_name,
)

ARM_FUNCTIONS_HELP = "Please see https://aka.ms/arm-functions for usage details."
ARM_PARAMETERS_HELP = "Please see https://aka.ms/arm-pass-parameter-values for usage details."
# Parameter types as declared (lower case) -> the name ARM shows in answers.
PARAMETER_TYPES = {
    "string": "String",
    "securestring": "SecureString",
    "int": "Int",
    "bool": "Bool",
    "object": "Object",
    "secureobject": "SecureObject",
    "array": "Array",
}
SECURE_TYPES = frozenset({"securestring", "secureobject"})
# Keys of a template resource that describe it to ARM, not to its resource provider.
RESOURCE_META_KEYS = frozenset(
    {"type", "name", "apiVersion", "dependsOn", "condition", "comments", "copy", "metadata"}
)


class TemplateError(Exception):
    """A template ARM refuses before deploying: 400 InvalidTemplate."""

    code = "InvalidTemplate"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    @property
    def message(self) -> str:
        return f"Deployment template validation failed: '{self.detail}'."


@dataclass(frozen=True)
class PlannedResource:
    """One template resource, evaluated: what ARM will PUT, and what it waits for first."""

    id: str  # the resource id it will have
    type: str  # e.g. Microsoft.Compute/virtualMachines
    name: str
    api_version: str
    body: Mapping[str, Any]  # location, tags, sku, properties, ... as evaluated
    depends_on: tuple[str, ...]  # ids of resources of this plan created first


@dataclass(frozen=True)
class Plan:
    """A template ready to deploy."""

    parameters: Mapping[str, Any]  # every declared parameter's value (defaults applied)
    parameter_types: Mapping[str, str]  # declared name -> ARM type name (String, Int, ...)
    resources: tuple[PlannedResource, ...]  # in an order that honours dependsOn
    skipped: tuple[str, ...]  # ids of resources whose condition was false


# -- parameters -------------------------------------------------------------------------------


def _allowed(value: Any, allowed: list[Any]) -> bool:
    """Whether a parameter value is one of its `allowedValues`: strings without regard to case,
    as ARM compares them (Bicep's own `@allowed` check is stricter than ARM: Azure/bicep#2489);
    the value itself is kept as given."""
    if isinstance(value, str):
        return any(isinstance(a, str) and a.lower() == value.lower() for a in allowed)
    return value in allowed


def _check_parameter(name: str, declared: Mapping[str, Any], value: Any) -> None:
    kind = str(declared.get("type", "")).lower()
    python = {
        "string": str,
        "securestring": str,
        "int": int,
        "bool": bool,
        "object": dict,
        "secureobject": dict,
        "array": list,
    }[kind]
    if not isinstance(value, python) or (python is int and isinstance(value, bool)):
        raise TemplateError(
            f"Template parameter '{name}' was provided an invalid value. Expected a value of "
            f"type '{PARAMETER_TYPES[kind]}', but received a value of type "
            f"'{type_name(value)}'. {ARM_PARAMETERS_HELP}"
        )
    allowed = declared.get("allowedValues")
    if isinstance(allowed, list) and not _allowed(value, allowed):
        raise TemplateError(
            f"The provided value '{to_string(value)}' for the template parameter '{name}' is "
            "not valid. The parameter value is not part of the allowed value(s): "
            f"'{','.join(to_string(a) for a in allowed)}'."
        )
    for bound, test, words in (
        ("minLength", lambda b: len(value) < b, "shorter than"),
        ("maxLength", lambda b: len(value) > b, "longer than"),
        ("minValue", lambda b: value < b, "less than"),
        ("maxValue", lambda b: value > b, "greater than"),
    ):
        limit = declared.get(bound)
        if isinstance(limit, int) and test(limit):
            raise TemplateError(
                f"The provided value for the template parameter '{name}' is not valid: it is "
                f"{words} the {bound} of {limit}."
            )


def _parameters(
    template: Mapping[str, Any], provided: Mapping[str, Any], scope: Scope
) -> tuple[dict[str, Any], dict[str, str]]:
    declared = template.get("parameters") or {}
    if not isinstance(declared, dict):
        raise TemplateError("The template 'parameters' section must be an object.")
    by_lower = {name.lower(): name for name in declared}
    unknown = sorted(name for name in provided if name.lower() not in by_lower)
    if unknown:
        raise TemplateError(
            f"The template parameters '{', '.join(unknown)}' in the parameters file are not "
            "valid; they are not present in the original template and can therefore not be "
            "provided at deployment time. The only supported parameters for this template "
            f"are '{', '.join(declared)}'. {ARM_PARAMETERS_HELP}"
        )
    for name, spec in declared.items():
        kind = str(_object(spec).get("type", "")).lower()
        if kind not in PARAMETER_TYPES:
            raise TemplateError(
                f"The template parameter '{name}' has type '{_object(spec).get('type')}', "
                f"which is not one of '{', '.join(PARAMETER_TYPES.values())}'."
            )
    values: dict[str, Any] = {}
    given = {name.lower(): value for name, value in provided.items()}
    for name, spec in declared.items():
        spec = _object(spec)
        if name.lower() in given:
            value = given[name.lower()]
        elif "defaultValue" in spec:
            context = EvaluationContext(scope, values, {}, None)
            try:
                value = evaluate_value(spec["defaultValue"], context)
            except ExpressionError as error:
                raise TemplateError(
                    f"The template parameter '{name}' has a default value that cannot be "
                    f"evaluated: {error}"
                ) from None
        else:
            raise TemplateError(
                f"The value for the template parameter '{name}' is not provided. Please see "
                "https://aka.ms/arm-create-parameter-file for usage details."
            )
        _check_parameter(name, spec, value)
        values[name] = value
    types = {
        name: PARAMETER_TYPES[str(_object(spec)["type"]).lower()] for name, spec in declared.items()
    }
    return values, types


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# -- resources --------------------------------------------------------------------------------


@dataclass
class _Declared:
    """A template resource before its dependencies are resolved."""

    planned: PlannedResource
    depends_on_raw: list[str]
    label: str  # how errors name it: its name as written


def _check_functions(value: Any, where: str) -> None:
    """Refuse, at validation as ARM does, an unparsable expression or an unknown function
    anywhere in `value`, including in branches no evaluation takes."""
    if isinstance(value, dict):
        for item in value.values():
            _check_functions(item, where)
    elif isinstance(value, list):
        for item in value:
            _check_functions(item, where)
    elif is_expression(value):
        try:
            tree = parse_expression(value)
        except ExpressionError as error:
            raise TemplateError(
                f"{where} is not valid: the template language expression '{value}' is not "
                f"valid: {error} {ARM_FUNCTIONS_HELP}"
            ) from None
        for call in calls(tree):
            if call.name.lower() not in KNOWN_FUNCTIONS:
                raise TemplateError(
                    f"{where} is not valid: The template function '{call.name}' is not valid. "
                    f"{ARM_FUNCTIONS_HELP}"
                )


def _declare(raw: Any, position: int, context: EvaluationContext) -> _Declared | str:
    """The resource evaluated, or only its id when its condition is false."""
    if not isinstance(raw, dict):
        raise TemplateError(f"The template resource at position {position} is not an object.")
    label = str(raw.get("name", f"#{position}"))
    where = f"The template resource '{label}'"
    for unsupported, what in (
        ("copy", "copy loops"),
        ("resources", "nested child resources"),
    ):
        if unsupported in raw:
            raise TemplateError(f"{where} uses {what}, which the simulated ARM does not support.")
    for key in ("type", "name", "apiVersion"):
        if not raw.get(key):
            raise TemplateError(f"{where} must have a '{key}' property.")
    _check_functions(raw, where)
    try:
        condition = evaluate_value(raw.get("condition", True), context)
        rtype = evaluate_value(raw["type"], context)
        name = evaluate_value(raw["name"], context)
    except ExpressionError as error:
        raise TemplateError(f"{where} is not valid: {error} {ARM_FUNCTIONS_HELP}") from None
    if not isinstance(condition, bool):
        raise TemplateError(f"{where} has a condition that is not a boolean.")
    if not isinstance(rtype, str) or not isinstance(name, str) or not name:
        raise TemplateError(f"{where} must have a string 'type' and a non-empty 'name'.")
    names = name.split("/")
    try:
        rid = resource_id(context.scope.subscription_id, context.scope.resource_group, rtype, names)
    except ExpressionError as error:
        raise TemplateError(f"{where} is not valid: {error}") from None
    if not condition:
        return rid
    try:
        body = {
            key: evaluate_value(value, context)
            for key, value in raw.items()
            if key not in RESOURCE_META_KEYS
        }
        depends = evaluate_value(raw.get("dependsOn") or [], context)
    except ExpressionError as error:
        raise TemplateError(f"{where} is not valid: {error} {ARM_FUNCTIONS_HELP}") from None
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        raise TemplateError(f"{where} has a 'dependsOn' that is not a list of strings.")
    planned = PlannedResource(
        id=rid,
        type=rtype,
        name=name,
        api_version=str(raw["apiVersion"]),
        body=body,
        depends_on=(),
    )
    return _Declared(planned, depends, label)


def _matches(reference: str, rid: str) -> bool:
    """A dependsOn entry names this resource: by id, by type/name or by name alone."""
    rtype, name = type_and_name(rid)
    wanted = reference.lower().strip("/")
    return wanted in (rid.lower().strip("/"), f"{rtype}/{name}".lower(), name.lower())


def _resolve_dependencies(declared: list[_Declared], skipped: list[str]) -> list[PlannedResource]:
    resolved: list[PlannedResource] = []
    for item in declared:
        ids: list[str] = []
        for reference in item.depends_on_raw:
            if not reference:
                continue  # "[if(cond, id, '')]": ARM drops the empty dependency
            found = [o.planned.id for o in declared if _matches(reference, o.planned.id)]
            if found:
                ids.extend(i for i in found if i != item.planned.id and i not in ids)
                continue
            if any(_matches(reference, s) for s in skipped):
                continue  # a resource whose condition is false: the dependency is dropped
            raise TemplateError(f"The resource '{reference}' is not defined in the template.")
        resolved.append(dataclasses.replace(item.planned, depends_on=tuple(ids)))
    return _in_dependency_order(resolved)


def _in_dependency_order(resources: list[PlannedResource]) -> list[PlannedResource]:
    by_id = {r.id.lower(): r for r in resources}
    ordered: list[PlannedResource] = []
    state: dict[str, str] = {}  # id -> visiting | done

    def visit(resource: PlannedResource) -> None:
        key = resource.id.lower()
        if state.get(key) == "done":
            return
        if state.get(key) == "visiting":
            raise TemplateError(f"Circular dependency detected on resource: '{resource.id}'.")
        state[key] = "visiting"
        for dependency in resource.depends_on:
            visit(by_id[dependency.lower()])
        state[key] = "done"
        ordered.append(resource)

    for resource in resources:
        visit(resource)
    return ordered


def plan(template: Mapping[str, Any], parameters: Mapping[str, Any], scope: Scope) -> Plan:
    """Validate the template with these parameter values (plain values: Key Vault
    references already resolved) and evaluate every resource; TemplateError when ARM would
    answer 400 InvalidTemplate."""
    if not isinstance(template, dict):
        raise TemplateError("The template must be a JSON object.")
    for unsupported, what in (
        ("functions", "user-defined functions"),
        ("languageVersion", "symbolic-name templates (languageVersion 2.0)"),
    ):
        if template.get(unsupported):
            raise TemplateError(
                f"The template uses {what}, which the simulated ARM does not support."
            )
    resources = template.get("resources")
    if not isinstance(resources, list):
        raise TemplateError("The template 'resources' section must be an array.")
    values, types = _parameters(template, parameters, scope)
    variables = template.get("variables") or {}
    if not isinstance(variables, dict):
        raise TemplateError("The template 'variables' section must be an object.")
    _check_functions(variables, "The template variables")
    _check_functions(template.get("outputs") or {}, "The template outputs")
    context = EvaluationContext(scope, values, variables, None)
    declared: list[_Declared] = []
    skipped: list[str] = []
    for position, raw in enumerate(resources):
        found = _declare(raw, position, context)
        if isinstance(found, str):
            skipped.append(found)
        else:
            declared.append(found)
    seen: set[str] = set()
    for item in declared:
        key = item.planned.id.lower()
        if key in seen:
            raise TemplateError(
                f"The resource '{item.planned.id}' is defined multiple times in a template."
            )
        seen.add(key)
    ordered = _resolve_dependencies(declared, skipped)
    return Plan(
        parameters=values,
        parameter_types=types,
        resources=tuple(ordered),
        skipped=tuple(skipped),
    )


def evaluate_outputs(
    template: Mapping[str, Any], deployed: Plan, scope: Scope, reference: Reference
) -> dict[str, dict[str, Any]]:
    """The deployment's outputs, {name: {"type", "value"}}, once its resources exist;
    ExpressionError when one cannot be evaluated (ARM: DeploymentOutputEvaluationFailed)."""
    context = EvaluationContext(
        scope, deployed.parameters, template.get("variables") or {}, reference
    )
    outputs: dict[str, dict[str, Any]] = {}
    for name, spec in (template.get("outputs") or {}).items():
        spec = _object(spec)
        if not evaluate_value(spec.get("condition", True), context):
            continue
        kind = PARAMETER_TYPES.get(str(spec.get("type", "")).lower(), str(spec.get("type", "")))
        try:
            value = evaluate_value(spec.get("value"), context)
        except ExpressionError as error:
            raise ExpressionError(f"The template output '{name}' is not valid: {error}") from None
        outputs[name] = {"type": kind, "value": value}
    return outputs
