"""The ARM template language's functions (concat, format, resourceId, uniqueString, if's
siblings, ...: arm_templates.py's module docstring lists them) and the scope a deployment
gives them. The evaluator (template_evaluation.py) calls them through `FUNCTIONS`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from wmsim.azure.template_expressions import ExpressionError

UNIQUE_STRING_LENGTH = 13
UNIQUE_STRING_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"


@dataclass(frozen=True)
class Scope:
    """Where the deployment runs: what resourceGroup(), subscription() and deployment() say."""

    subscription_id: str
    resource_group: str
    location: str  # the resource group's
    deployment_name: str = ""
    tenant_id: str = "00000000-0000-0000-0000-000000000001"
    resource_group_tags: Mapping[str, str] = field(default_factory=dict)


Reference = Callable[[str, bool], Any]  # (resource id, full) -> its model or properties


class Context(Protocol):
    """What a function sees of an evaluation (template_evaluation's context)."""

    scope: Scope
    reference: Reference | None

    def parameter(self, name: str) -> Any: ...

    def variable(self, name: str) -> Any: ...


def type_name(value: Any) -> str:
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Integer"
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "Array"
    return "Object"


def _want(function: str, value: Any, *types: type) -> Any:
    ok = False if isinstance(value, bool) and bool not in types else isinstance(value, types)
    if not ok:
        raise ExpressionError(
            f"The template language function '{function}' got an argument of type "
            f"'{type_name(value)}' it cannot use."
        )
    return value


def to_string(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"))


def _concat(_: Context, *args: Any) -> Any:
    if args and all(isinstance(a, list) for a in args):
        return [item for arg in args for item in arg]
    for arg in args:
        if isinstance(arg, dict | list):
            raise ExpressionError(
                "The template language function 'concat' expects its arguments to be either "
                "all strings or all arrays."
            )
    return "".join(to_string(a) for a in args)


_FORMAT_ITEM = re.compile(r"\{\{|\}\}|\{(\d+)\}")


def _format(_: Context, text: Any, *args: Any) -> str:
    text = _want("format", text, str)

    def item(match: re.Match[str]) -> str:
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        position = int(match.group(1))
        if position >= len(args):
            raise ExpressionError(
                f"The template language function 'format' has no argument {position}."
            )
        return to_string(args[position])

    return _FORMAT_ITEM.sub(item, text)


def resource_id(
    subscription_id: str, resource_group: str, resource_type: str, names: Sequence[str]
) -> str:
    """An ARM resource id: /subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{t}/{n}..."""
    segments = [s for s in resource_type.strip("/").split("/") if s]
    if len(segments) < 2:
        raise ExpressionError(f"The resource type '{resource_type}' is not valid.")
    namespace, types = segments[0], segments[1:]
    if len(names) != len(types):
        raise ExpressionError(
            f"Unable to evaluate template language function 'resourceId': the type "
            f"'{resource_type}' requires '{len(types)}' resource name argument(s)."
        )
    path = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=True))
    return (
        f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
        f"{namespace}/{path}"
    )


def type_and_name(rid: str) -> tuple[str, str]:
    """(type, name) of a resource id: Microsoft.Network/virtualNetworks/subnets, vnet/sub."""
    segments = rid.split("/providers/", 1)[1].split("/")
    types = [segments[0], *segments[1::2]]
    return "/".join(types), "/".join(segments[2::2])


def _resource_id(context: Context, *args: Any) -> str:
    for arg in args:
        _want("resourceId", arg, str)
    at = next((i for i, arg in enumerate(args) if "/" in arg), None)
    if at is None or at > 2:
        raise ExpressionError(
            "Unable to evaluate template language function 'resourceId': no resource type "
            "among its arguments."
        )
    sub, group = context.scope.subscription_id, context.scope.resource_group
    if at == 1:
        group = args[0]
    elif at == 2:
        sub, group = args[0], args[1]
    return resource_id(sub, group, args[at], args[at + 1 :])


def _resource_group(context: Context) -> dict[str, Any]:
    scope = context.scope
    return {
        "id": f"/subscriptions/{scope.subscription_id}/resourceGroups/{scope.resource_group}",
        "name": scope.resource_group,
        "type": "Microsoft.Resources/resourceGroups",
        "location": scope.location,
        "tags": dict(scope.resource_group_tags),
        "properties": {"provisioningState": "Succeeded"},
    }


def _subscription(context: Context) -> dict[str, Any]:
    scope = context.scope
    return {
        "id": f"/subscriptions/{scope.subscription_id}",
        "subscriptionId": scope.subscription_id,
        "tenantId": scope.tenant_id,
        "displayName": f"Simulated subscription {scope.subscription_id}",
    }


def _deployment(context: Context) -> dict[str, Any]:
    return {"name": context.scope.deployment_name, "properties": {}}


def unique_string(*parts: str) -> str:
    """13 characters of [a-z2-7], the same for the same inputs (not ARM's own hash)."""
    digest = int.from_bytes(hashlib.sha256("-".join(parts).encode()).digest()[:9], "big")
    out = []
    for _ in range(UNIQUE_STRING_LENGTH):
        out.append(UNIQUE_STRING_ALPHABET[digest % 32])
        digest //= 32
    return "".join(out)


def _unique_string(_: Context, *parts: Any) -> str:
    return unique_string(*(_want("uniqueString", p, str) for p in parts))


def _empty(_: Context, value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def _union(_: Context, *args: Any) -> Any:
    if all(isinstance(a, dict) for a in args):
        merged: dict[str, Any] = {}
        for arg in args:
            merged.update(arg)
        return merged
    if all(isinstance(a, list) for a in args):
        out: list[Any] = []
        for arg in args:
            out.extend(item for item in arg if item not in out)
        return out
    raise ExpressionError(
        "The template language function 'union' expects its arguments to be either all "
        "objects or all arrays."
    )


def _create_object(_: Context, *args: Any) -> dict[str, Any]:
    if len(args) % 2:
        raise ExpressionError(
            "The template language function 'createObject' must have an even number of "
            "arguments (names and values)."
        )
    return {_want("createObject", args[i], str): args[i + 1] for i in range(0, len(args), 2)}


def _json(_: Context, text: Any) -> Any:
    try:
        return json.loads(_want("json", text, str))
    except ValueError:
        raise ExpressionError(
            f"The template language function 'json' got a value that is not JSON: '{text}'."
        ) from None


def _int(_: Context, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(_want("int", value, str))
    except ValueError:
        raise ExpressionError(
            f"The template language function 'int' cannot convert '{value}' to an integer."
        ) from None


def _bool(_: Context, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int):
        return value != 0
    raise ExpressionError(f"The template language function 'bool' cannot convert '{value}'.")


def _length(_: Context, value: Any) -> int:
    return len(_want("length", value, str, list, dict))


def _contains(_: Context, container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return to_string(item) in container
    if isinstance(container, dict):
        return any(key.lower() == str(item).lower() for key in container)
    return item in _want("contains", container, list)


def _coalesce(_: Context, *args: Any) -> Any:
    return next((a for a in args if a is not None), None)


def _logic(name: str, combine: Callable[[list[bool]], bool]) -> Callable[..., bool]:
    def function(_: Context, *args: Any) -> bool:
        return combine([_want(name, a, bool) for a in args])

    return function


def _reference(context: Context, target: Any, *rest: Any) -> Any:
    if context.reference is None:
        raise ExpressionError(
            "The template function 'reference' is only supported in outputs by the simulated ARM."
        )
    target = _want("reference", target, str)
    full = any(isinstance(r, str) and r.lower() == "full" for r in rest)
    return context.reference(target, full)


def _base64_to_string(_: Context, value: Any) -> str:
    try:
        return base64.b64decode(_want("base64ToString", value, str), validate=True).decode()
    except ValueError:
        raise ExpressionError(f"The value '{value}' is not valid base64.") from None


# name (lower case) -> (min args, max args or None, function(context, *args))
FUNCTIONS: dict[str, tuple[int, int | None, Callable[..., Any]]] = {
    "parameters": (1, 1, lambda c, n: c.parameter(_want("parameters", n, str))),
    "variables": (1, 1, lambda c, n: c.variable(_want("variables", n, str))),
    "concat": (1, None, _concat),
    "format": (1, None, _format),
    "resourceid": (2, None, _resource_id),
    "resourcegroup": (0, 0, _resource_group),
    "subscription": (0, 0, _subscription),
    "deployment": (0, 0, _deployment),
    "uniquestring": (1, None, _unique_string),
    "equals": (2, 2, lambda _, a, b: a == b and type(a) is type(b)),
    "not": (1, 1, lambda _, a: not _want("not", a, bool)),
    "and": (2, None, _logic("and", all)),
    "or": (2, None, _logic("or", any)),
    "empty": (1, 1, _empty),
    "coalesce": (1, None, _coalesce),
    "contains": (2, 2, _contains),
    "length": (1, 1, _length),
    "tolower": (1, 1, lambda _, s: _want("toLower", s, str).lower()),
    "toupper": (1, 1, lambda _, s: _want("toUpper", s, str).upper()),
    "string": (1, 1, lambda _, v: to_string(v)),
    "int": (1, 1, _int),
    "bool": (1, 1, _bool),
    "json": (1, 1, _json),
    "createobject": (0, None, _create_object),
    "createarray": (0, None, lambda _, *items: list(items)),
    "union": (1, None, _union),
    "true": (0, 0, lambda _: True),
    "false": (0, 0, lambda _: False),
    "null": (0, 0, lambda _: None),
    "base64": (1, 1, lambda _, s: base64.b64encode(_want("base64", s, str).encode()).decode()),
    "base64tostring": (1, 1, _base64_to_string),
    "reference": (1, 3, _reference),
}
KNOWN_FUNCTIONS = frozenset({*FUNCTIONS, "if"})
