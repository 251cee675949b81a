"""Taskcluster scope satisfaction and scope-expression templates, as Taskcluster does them.

Sources (taskcluster/taskcluster @ 9d59eb59 and taskcluster/taskcluster-lib-scopes):
- a scope *pattern* held by a client satisfies a required scope when equal, or when the pattern
  ends in `*` and the scope starts with the rest (lib-scopes `patternMatch`); a `*` anywhere
  else is a literal character;
- an *expression* is a scope string or `{"AllOf": [...]}` / `{"AnyOf": [...]}` with exactly
  that one key, nested freely; an empty AllOf is satisfied, an empty AnyOf is not
  (lib-scopes `satisfiesExpression`);
- the missing scopes for an error message are the expression with every satisfied scope
  removed (lib-scopes `removeGivenScopes`), what `InsufficientScopes` reports as `unsatisfied`;
- an endpoint declares a *template*: strings with `<param>` placeholders filled from route
  params, the body or the query (TC `libraries/api/src/expressions.js`). Templates may also
  hold `{"if", "then"[, "else"]}` and `{"for", "in", "each"}` forms, but no worker-manager
  endpoint does (TC `generated/references.json` → `references/worker-manager/v1/api.json`),
  so they are refused here rather than half-supported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

# A scope expression as it appears in JSON: a string, or a one-key AllOf/AnyOf object.
ScopeExpression: TypeAlias = str | Mapping[str, Sequence[Any]]

# lib-scopes `validScope`: printable ASCII, space included, no other whitespace.
_VALID_SCOPE = re.compile(r"^[\x20-\x7e]*$")
# api `compileTemplate`: the placeholder syntax; dots are not part of it.
_PLACEHOLDER = re.compile(r"<([a-zA-Z][a-zA-Z0-9_]*)>")
_OPERATORS = ("AllOf", "AnyOf")


class ScopeTemplateError(ValueError):
    """A scope template could not be rendered with the parameters given."""


def valid_scope(scope: object) -> bool:
    return isinstance(scope, str) and _VALID_SCOPE.match(scope) is not None


def valid_expression(expr: object) -> bool:
    if isinstance(expr, str):
        return valid_scope(expr)
    if not isinstance(expr, Mapping) or len(expr) != 1:
        return False
    (operator, operands) = next(iter(expr.items()))
    return (
        operator in _OPERATORS
        and isinstance(operands, list | tuple)
        and all(valid_expression(e) for e in operands)
    )


def pattern_match(pattern: str, scope: str) -> bool:
    """Whether one scope a client holds (`pattern`) satisfies one required scope."""
    if pattern == scope:
        return True
    return pattern.endswith("*") and scope.startswith(pattern[:-1])


def satisfies(scopes: Iterable[str], expr: ScopeExpression) -> bool:
    held = tuple(scopes)

    def check(e: ScopeExpression) -> bool:
        if isinstance(e, str):
            return any(pattern_match(p, e) for p in held)
        operator, operands = _split(e)
        if operator == "AllOf":
            return all(check(o) for o in operands)
        return any(check(o) for o in operands)

    return check(expr)


def missing_scopes(scopes: Iterable[str], expr: ScopeExpression) -> ScopeExpression | None:
    """The part of `expr` that `scopes` leave unsatisfied; None when nothing is missing.

    Every scope left under an AllOf is needed; one branch of an AnyOf is enough. A one-element
    AllOf/AnyOf collapses to its element, as Taskcluster prints it.
    """
    held = tuple(scopes)

    def simplify(e: ScopeExpression) -> ScopeExpression | None:
        if isinstance(e, str):
            return None if any(pattern_match(p, e) for p in held) else e
        operator, operands = _split(e)
        rest = [simplify(o) for o in operands]
        if operator == "AllOf":
            still = [r for r in rest if r is not None]
            if not still:
                return None
            return still[0] if len(still) == 1 else {"AllOf": still}
        if any(r is None for r in rest):
            return None
        return rest[0] if len(rest) == 1 else {"AnyOf": rest}

    return simplify(expr)


def template_params(template: ScopeExpression) -> frozenset[str]:
    """The parameter names a template needs."""
    if isinstance(template, str):
        return frozenset(_PLACEHOLDER.findall(template))
    _, operands = _split(template)
    names: frozenset[str] = frozenset()
    for operand in operands:
        names |= template_params(operand)
    return names


def render(template: ScopeExpression, params: Mapping[str, object]) -> ScopeExpression:
    """Fill a template's `<param>` placeholders; a missing or non-string parameter is an error.

    Integers are accepted too, as Taskcluster's `render` accepts numbers.
    """
    if isinstance(template, str):
        return _PLACEHOLDER.sub(lambda m: _param_text(m.group(1), params), template)
    operator, operands = _split(template)
    return {operator: [render(o, params) for o in operands]}


def can_render_from(template: ScopeExpression, names: Iterable[str]) -> bool:
    """Whether the named (route) parameters alone fill the template.

    Taskcluster checks such endpoints before the handler runs; the others (a parameter from the
    body or query, e.g. reregisterWorker, reportWorkerError) are checked by the handler.
    """
    return template_params(template) <= frozenset(names)


def _param_text(name: str, params: Mapping[str, object]) -> str:
    value = params.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ScopeTemplateError(
            f"Scope expression template expected parameter '{name}' to be a string or number"
        )
    return str(value)


def _split(expr: ScopeExpression) -> tuple[str, Sequence[Any]]:
    if isinstance(expr, Mapping) and len(expr) == 1:
        (operator, operands) = next(iter(expr.items()))
        if operator in _OPERATORS and isinstance(operands, list | tuple):
            return operator, operands
        if operator in ("if", "for"):
            raise ScopeTemplateError(f"'{operator}' templates are not used by worker-manager")
    if isinstance(expr, Mapping) and ({"if", "for"} & set(expr)):
        raise ScopeTemplateError("'if'/'for' templates are not used by worker-manager")
    raise ScopeTemplateError(f"not a scope expression: {expr!r}")
