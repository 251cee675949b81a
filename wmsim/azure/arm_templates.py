"""ARM template evaluation for the simulated ARM: the subset Taskcluster worker templates use.

Pure: a template, the deployment's parameter values and its scope go in; the resources to
create, in dependency order, come out (`plan`), and a finished deployment's outputs
(`evaluate_outputs`, which reads deployed resources through a `reference` callback).

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

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ARM_FUNCTIONS_HELP = "Please see https://aka.ms/arm-functions for usage details."
ARM_PARAMETERS_HELP = "Please see https://aka.ms/arm-pass-parameter-values for usage details."
UNIQUE_STRING_LENGTH = 13
UNIQUE_STRING_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
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


class ExpressionError(Exception):
    """An expression that cannot be parsed or evaluated; the caller says where it was."""


@dataclass(frozen=True)
class Scope:
    """Where the deployment runs: what resourceGroup(), subscription() and deployment() say."""

    subscription_id: str
    resource_group: str
    location: str  # the resource group's
    deployment_name: str = ""
    tenant_id: str = "00000000-0000-0000-0000-000000000001"
    resource_group_tags: Mapping[str, str] = field(default_factory=dict)


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


# -- expressions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Literal:
    value: Any


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class _Member:
    target: Any
    name: str


@dataclass(frozen=True)
class _Index:
    target: Any
    index: Any


_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>[(),.\[\]]))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None:
            raise ExpressionError(f"unexpected character '{text[at:].strip()[0]}'")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        at = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._at = 0

    def parse(self) -> Any:
        node = self._expression()
        if self._at != len(self._tokens):
            raise ExpressionError(f"unexpected '{self._tokens[self._at][1]}'")
        return node

    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _take(self, value: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise ExpressionError("the expression ends too early")
        if value is not None and token[1] != value:
            raise ExpressionError(f"expected '{value}' but found '{token[1]}'")
        self._at += 1
        return token

    def _expression(self) -> Any:
        node = self._primary()
        while (token := self._peek()) is not None and token[1] in (".", "["):
            self._take()
            if token[1] == ".":
                kind, name = self._take()
                if kind != "name":
                    raise ExpressionError(f"expected a property name after '.', found '{name}'")
                node = _Member(node, name)
            else:
                node = _Index(node, self._expression())
                self._take("]")
        return node

    def _primary(self) -> Any:
        kind, value = self._take()
        if kind == "string":
            return _Literal(value[1:-1].replace("''", "'"))
        if kind == "number":
            return _Literal(int(value))
        if kind != "name":
            raise ExpressionError(f"unexpected '{value}'")
        self._take("(")
        args: list[Any] = []
        if (token := self._peek()) is not None and token[1] == ")":
            self._take()
            return _Call(value, ())
        while True:
            args.append(self._expression())
            kind, sep = self._take()
            if sep == ")":
                return _Call(value, tuple(args))
            if sep != ",":
                raise ExpressionError(f"expected ',' or ')' but found '{sep}'")


def is_expression(value: Any) -> bool:
    return (
        isinstance(value, str)
        and value.startswith("[")
        and value.endswith("]")
        and not value.startswith("[[")
    )


def parse_expression(text: str) -> Any:
    """The syntax tree of a template expression (the string with its brackets)."""
    return _Parser(text[1:-1]).parse()


def _calls(node: Any) -> Iterator[_Call]:
    if isinstance(node, _Call):
        yield node
        for arg in node.args:
            yield from _calls(arg)
    elif isinstance(node, _Member):
        yield from _calls(node.target)
    elif isinstance(node, _Index):
        yield from _calls(node.target)
        yield from _calls(node.index)


# -- evaluation context -----------------------------------------------------------------------

Reference = Callable[[str, bool], Any]  # (resource id, full) -> its model or properties


class _Context:
    """What expressions see: parameters, variables (evaluated once, on first use), the scope,
    and `reference` (only where it is allowed)."""

    def __init__(
        self,
        scope: Scope,
        parameters: Mapping[str, Any],
        variables: Mapping[str, Any],
        reference: Reference | None,
    ) -> None:
        self.scope = scope
        self.parameters = {k.lower(): v for k, v in parameters.items()}
        self._variables_raw = {k.lower(): v for k, v in variables.items()}
        self._variables: dict[str, Any] = {}
        self._evaluating: set[str] = set()
        self.reference = reference

    def parameter(self, name: str) -> Any:
        key = name.lower()
        if key not in self.parameters:
            raise ExpressionError(f"The template parameter '{name}' is not found.")
        return self.parameters[key]

    def variable(self, name: str) -> Any:
        key = name.lower()
        if key in self._variables:
            return self._variables[key]
        if key not in self._variables_raw:
            raise ExpressionError(f"The template variable '{name}' is not found.")
        if key in self._evaluating:
            raise ExpressionError(f"The template variable '{name}' refers to itself.")
        if isinstance(self._variables_raw[key], dict) and "copy" in self._variables_raw[key]:
            raise ExpressionError(
                f"The template variable '{name}' uses a copy loop, which the simulated ARM "
                "does not support."
            )
        self._evaluating.add(key)
        try:
            value = evaluate_value(self._variables_raw[key], self)
        finally:
            self._evaluating.discard(key)
        self._variables[key] = value
        return value


def evaluate_value(value: Any, context: _Context) -> Any:
    """A template value with every expression in it evaluated (object keys stay as written)."""
    if isinstance(value, str):
        if is_expression(value):
            return _evaluate(parse_expression(value), context)
        return value[1:] if value.startswith("[[") else value
    if isinstance(value, dict):
        return {key: evaluate_value(item, context) for key, item in value.items()}
    if isinstance(value, list):
        return [evaluate_value(item, context) for item in value]
    return value


def evaluate(
    value: Any,
    scope: Scope,
    parameters: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
) -> Any:
    """One template value evaluated on its own, parameters given as plain values;
    ExpressionError when it cannot be."""
    return evaluate_value(value, _Context(scope, parameters or {}, variables or {}, None))


def _evaluate(node: Any, context: _Context) -> Any:
    if isinstance(node, _Literal):
        return node.value
    if isinstance(node, _Member):
        return _member(_evaluate(node.target, context), node.name)
    if isinstance(node, _Index):
        return _index(_evaluate(node.target, context), _evaluate(node.index, context))
    name = node.name.lower()
    if name == "if":  # only the branch taken is evaluated: json('null') guards rely on it
        _arity(node, 3, 3)
        condition = _evaluate(node.args[0], context)
        if not isinstance(condition, bool):
            raise ExpressionError("The template function 'if' expects a boolean condition.")
        return _evaluate(node.args[1] if condition else node.args[2], context)
    function = _FUNCTIONS.get(name)
    if function is None:
        raise ExpressionError(f"The template function '{node.name}' is not valid.")
    low, high, body = function
    _arity(node, low, high)
    return body(context, *(_evaluate(arg, context) for arg in node.args))


def _arity(node: _Call, low: int, high: int | None) -> None:
    count = len(node.args)
    if count < low or (high is not None and count > high):
        expected = str(low) if low == high else f"{low} to {high if high is not None else 'any'}"
        raise ExpressionError(
            f"The template language function '{node.name}' must have {expected} argument(s), "
            f"it has {count}."
        )


def _member(target: Any, name: str) -> Any:
    if not isinstance(target, dict):
        raise ExpressionError(
            f"The language expression property '{name}' can't be evaluated: the value is not "
            "an object."
        )
    for key, value in target.items():
        if key.lower() == name.lower():
            return value
    raise ExpressionError(
        f"The language expression property '{name}' doesn't exist, available properties are "
        f"'{', '.join(target)}'."
    )


def _index(target: Any, index: Any) -> Any:
    if isinstance(target, dict) and isinstance(index, str):
        return _member(target, index)
    if not isinstance(target, list) or not isinstance(index, int) or isinstance(index, bool):
        raise ExpressionError(
            f"The language expression property array index '{index}' can't be evaluated."
        )
    if not 0 <= index < len(target):
        raise ExpressionError(
            f"The language expression property array index '{index}' is out of bounds."
        )
    return target[index]


# -- functions --------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
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
            f"'{_type_name(value)}' it cannot use."
        )
    return value


def _to_string(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"))


def _concat(_: _Context, *args: Any) -> Any:
    if args and all(isinstance(a, list) for a in args):
        return [item for arg in args for item in arg]
    for arg in args:
        if isinstance(arg, dict | list):
            raise ExpressionError(
                "The template language function 'concat' expects its arguments to be either "
                "all strings or all arrays."
            )
    return "".join(_to_string(a) for a in args)


_FORMAT_ITEM = re.compile(r"\{\{|\}\}|\{(\d+)\}")


def _format(_: _Context, text: Any, *args: Any) -> str:
    text = _want("format", text, str)

    def item(match: re.Match[str]) -> str:
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        position = int(match.group(1))
        if position >= len(args):
            raise ExpressionError(
                f"The template language function 'format' has no argument {position}."
            )
        return _to_string(args[position])

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


def _resource_id(context: _Context, *args: Any) -> str:
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


def _resource_group(context: _Context) -> dict[str, Any]:
    scope = context.scope
    return {
        "id": f"/subscriptions/{scope.subscription_id}/resourceGroups/{scope.resource_group}",
        "name": scope.resource_group,
        "type": "Microsoft.Resources/resourceGroups",
        "location": scope.location,
        "tags": dict(scope.resource_group_tags),
        "properties": {"provisioningState": "Succeeded"},
    }


def _subscription(context: _Context) -> dict[str, Any]:
    scope = context.scope
    return {
        "id": f"/subscriptions/{scope.subscription_id}",
        "subscriptionId": scope.subscription_id,
        "tenantId": scope.tenant_id,
        "displayName": f"Simulated subscription {scope.subscription_id}",
    }


def _deployment(context: _Context) -> dict[str, Any]:
    return {"name": context.scope.deployment_name, "properties": {}}


def unique_string(*parts: str) -> str:
    """13 characters of [a-z2-7], the same for the same inputs (not ARM's own hash)."""
    digest = int.from_bytes(hashlib.sha256("-".join(parts).encode()).digest()[:9], "big")
    out = []
    for _ in range(UNIQUE_STRING_LENGTH):
        out.append(UNIQUE_STRING_ALPHABET[digest % 32])
        digest //= 32
    return "".join(out)


def _unique_string(_: _Context, *parts: Any) -> str:
    return unique_string(*(_want("uniqueString", p, str) for p in parts))


def _empty(_: _Context, value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def _union(_: _Context, *args: Any) -> Any:
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


def _create_object(_: _Context, *args: Any) -> dict[str, Any]:
    if len(args) % 2:
        raise ExpressionError(
            "The template language function 'createObject' must have an even number of "
            "arguments (names and values)."
        )
    return {_want("createObject", args[i], str): args[i + 1] for i in range(0, len(args), 2)}


def _json(_: _Context, text: Any) -> Any:
    try:
        return json.loads(_want("json", text, str))
    except ValueError:
        raise ExpressionError(
            f"The template language function 'json' got a value that is not JSON: '{text}'."
        ) from None


def _int(_: _Context, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(_want("int", value, str))
    except ValueError:
        raise ExpressionError(
            f"The template language function 'int' cannot convert '{value}' to an integer."
        ) from None


def _bool(_: _Context, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int):
        return value != 0
    raise ExpressionError(f"The template language function 'bool' cannot convert '{value}'.")


def _length(_: _Context, value: Any) -> int:
    return len(_want("length", value, str, list, dict))


def _contains(_: _Context, container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return _to_string(item) in container
    if isinstance(container, dict):
        return any(key.lower() == str(item).lower() for key in container)
    return item in _want("contains", container, list)


def _coalesce(_: _Context, *args: Any) -> Any:
    return next((a for a in args if a is not None), None)


def _logic(name: str, combine: Callable[[list[bool]], bool]) -> Callable[..., bool]:
    def function(_: _Context, *args: Any) -> bool:
        return combine([_want(name, a, bool) for a in args])

    return function


def _reference(context: _Context, target: Any, *rest: Any) -> Any:
    if context.reference is None:
        raise ExpressionError(
            "The template function 'reference' is only supported in outputs by the simulated ARM."
        )
    target = _want("reference", target, str)
    full = any(isinstance(r, str) and r.lower() == "full" for r in rest)
    return context.reference(target, full)


def _base64_to_string(_: _Context, value: Any) -> str:
    try:
        return base64.b64decode(_want("base64ToString", value, str), validate=True).decode()
    except ValueError:
        raise ExpressionError(f"The value '{value}' is not valid base64.") from None


# name (lower case) -> (min args, max args or None, function(context, *args))
_FUNCTIONS: dict[str, tuple[int, int | None, Callable[..., Any]]] = {
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
    "string": (1, 1, lambda _, v: _to_string(v)),
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
KNOWN_FUNCTIONS = frozenset({*_FUNCTIONS, "if"})


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
            f"'{_type_name(value)}'. {ARM_PARAMETERS_HELP}"
        )
    allowed = declared.get("allowedValues")
    if isinstance(allowed, list) and not _allowed(value, allowed):
        raise TemplateError(
            f"The provided value '{_to_string(value)}' for the template parameter '{name}' is "
            "not valid. The parameter value is not part of the allowed value(s): "
            f"'{','.join(_to_string(a) for a in allowed)}'."
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
            context = _Context(scope, values, {}, None)
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
        for call in _calls(tree):
            if call.name.lower() not in KNOWN_FUNCTIONS:
                raise TemplateError(
                    f"{where} is not valid: The template function '{call.name}' is not valid. "
                    f"{ARM_FUNCTIONS_HELP}"
                )


def _declare(raw: Any, position: int, context: _Context) -> _Declared | str:
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


def type_and_name(rid: str) -> tuple[str, str]:
    """(type, name) of a resource id: Microsoft.Network/virtualNetworks/subnets, vnet/sub."""
    segments = rid.split("/providers/", 1)[1].split("/")
    types = [segments[0], *segments[1::2]]
    return "/".join(types), "/".join(segments[2::2])


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
    context = _Context(scope, values, variables, None)
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
    context = _Context(scope, deployed.parameters, template.get("variables") or {}, reference)
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
