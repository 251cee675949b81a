"""Evaluating ARM template values: every `[...]` expression in a value, against the
deployment's parameters, variables (evaluated once, on first use) and scope, calling the
template functions (template_functions.py) on the parsed tree (template_expressions.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wmsim.azure.template_expressions import (
    Call,
    ExpressionError,
    Index,
    Literal,
    Member,
    is_expression,
    parse_expression,
)
from wmsim.azure.template_functions import FUNCTIONS, Reference, Scope


class EvaluationContext:
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


def evaluate_value(value: Any, context: EvaluationContext) -> Any:
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
    return evaluate_value(value, EvaluationContext(scope, parameters or {}, variables or {}, None))


def _evaluate(node: Any, context: EvaluationContext) -> Any:
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Member):
        return _member(_evaluate(node.target, context), node.name)
    if isinstance(node, Index):
        return _index(_evaluate(node.target, context), _evaluate(node.index, context))
    name = node.name.lower()
    if name == "if":  # only the branch taken is evaluated: json('null') guards rely on it
        _arity(node, 3, 3)
        condition = _evaluate(node.args[0], context)
        if not isinstance(condition, bool):
            raise ExpressionError("The template function 'if' expects a boolean condition.")
        return _evaluate(node.args[1] if condition else node.args[2], context)
    function = FUNCTIONS.get(name)
    if function is None:
        raise ExpressionError(f"The template function '{node.name}' is not valid.")
    low, high, body = function
    _arity(node, low, high)
    return body(context, *(_evaluate(arg, context) for arg in node.args))


def _arity(node: Call, low: int, high: int | None) -> None:
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
