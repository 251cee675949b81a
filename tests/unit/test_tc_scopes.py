"""Taskcluster scope satisfaction, missing scopes and templates, case by case."""

from __future__ import annotations

import pytest
import taskcluster

from wm.api.endpoint_table import BY_NAME
from wm.tc.scopes import (
    ScopeTemplateError,
    can_render_from,
    missing_scopes,
    render,
    satisfies,
    template_params,
    valid_expression,
)

SATISFACTION = [
    ("an exact scope", ["a:b"], "a:b", True),
    ("another scope", ["a:c"], "a:b", False),
    ("a trailing star covers the prefix", ["a:*"], "a:b:c", True),
    ("a trailing star covers the bare prefix", ["a:*"], "a:", True),
    ("a star alone covers everything", ["*"], "anything", True),
    ("a star in the middle is a literal", ["a:*:c"], "a:b:c", False),
    ("a star keeps all of the prefix before it", ["a:b*"], "a:c", False),
    ("a star after a prefix covers what extends it", ["a:b*"], "a:bcd", True),
    ("a star after a prefix covers the prefix itself", ["a:b*"], "a:b", True),
    ("a required star needs a star", ["a:b"], "a:*", False),
    ("a prefix without star is not enough", ["a:b"], "a:bc", False),
    ("no scopes at all", [], "a", False),
    ("an AllOf needs each", ["a", "b"], {"AllOf": ["a", "b"]}, True),
    ("an AllOf short of one", ["a"], {"AllOf": ["a", "b"]}, False),
    ("an AnyOf needs one", ["b"], {"AnyOf": ["a", "b"]}, True),
    ("an AnyOf with none", ["c"], {"AnyOf": ["a", "b"]}, False),
    ("an empty AllOf is satisfied", [], {"AllOf": []}, True),
    ("an empty AnyOf is not", ["*"], {"AnyOf": []}, False),
    (
        "nested: AnyOf of an AllOf",
        ["x:1", "y:*"],
        {"AnyOf": ["admin", {"AllOf": ["x:1", "y:2"]}]},
        True,
    ),
    (
        "nested: the AllOf branch short",
        ["x:1"],
        {"AnyOf": ["admin", {"AllOf": ["x:1", "y:2"]}]},
        False,
    ),
    (
        "a worker's own credentials re-register it",
        ["worker-manager:reregister-worker:p/c/g/w"],
        "worker-manager:reregister-worker:p/c/g/w",
        True,
    ),
    (
        "but not another worker",
        ["worker-manager:reregister-worker:p/c/g/w"],
        "worker-manager:reregister-worker:p/c/g/w2",
        False,
    ),
]


@pytest.mark.parametrize(
    ("scenario", "held", "required", "expected"), SATISFACTION, ids=[s[0] for s in SATISFACTION]
)
def test_satisfaction(scenario, held, required, expected):
    assert satisfies(held, required) is expected


# The cases the client's DNF matcher can express: one scope, or one non-empty AllOf of scopes.
DNF_CASES = [
    s for s in SATISFACTION if isinstance(s[2], str) or (list(s[2]) == ["AllOf"] and s[2]["AllOf"])
]


@pytest.mark.parametrize(
    ("scenario", "held", "required", "expected"), DNF_CASES, ids=[s[0] for s in DNF_CASES]
)
def test_satisfaction_agrees_with_the_taskcluster_client(scenario, held, required, expected):
    # taskcluster.utils.scopeMatch takes disjunctive normal form: [[all of these], ...].
    dnf = [[required]] if isinstance(required, str) else [required["AllOf"]]
    assert taskcluster.utils.scopeMatch(held, dnf) is expected


@pytest.mark.parametrize(
    ("scenario", "held", "required", "missing"),
    [
        ("all held", ["a", "b"], {"AllOf": ["a", "b"]}, None),
        ("one of two missing collapses to the scope", ["a"], {"AllOf": ["a", "b"]}, "b"),
        ("both missing", [], {"AllOf": ["a", "b"]}, {"AllOf": ["a", "b"]}),
        ("an AnyOf with one branch held", ["b"], {"AnyOf": ["a", "b"]}, None),
        ("an AnyOf with none held", [], {"AnyOf": ["a", "b"]}, {"AnyOf": ["a", "b"]}),
        ("a one-branch AnyOf collapses to its branch", [], {"AnyOf": ["a"]}, "a"),
        ("a one-scope AllOf collapses to its scope", [], {"AllOf": ["a"]}, "a"),
        ("a star covers", ["a:*"], "a:b", None),
        ("a plain scope missing", [], "a:b", "a:b"),
        (
            "nested: the missing part of the AllOf branch",
            ["x:1"],
            {"AnyOf": ["admin", {"AllOf": ["x:1", "y:2"]}]},
            {"AnyOf": ["admin", "y:2"]},
        ),
    ],
)
def test_missing_scopes(scenario, held, required, missing):
    assert missing_scopes(held, required) == missing


@pytest.mark.parametrize(
    ("template", "params", "rendered"),
    [
        (
            "worker-manager:reregister-worker:<workerPoolId>/<workerGroup>/<workerId>",
            {"workerPoolId": "proj/ci", "workerGroup": "us-east-1", "workerId": "i-0abc"},
            "worker-manager:reregister-worker:proj/ci/us-east-1/i-0abc",
        ),
        (
            {"AllOf": ["m:<workerPoolId>", {"AnyOf": ["p:<providerId>", "admin"]}]},
            {"workerPoolId": "a/b", "providerId": "aws"},
            {"AllOf": ["m:a/b", {"AnyOf": ["p:aws", "admin"]}]},
        ),
        ("x:<n>", {"n": 7}, "x:7"),
        ("no params", {}, "no params"),
    ],
)
def test_render(template, params, rendered):
    assert render(template, params) == rendered


@pytest.mark.parametrize(
    ("template", "params"),
    [
        ("x:<a>", {}),
        ("x:<a>", {"a": None}),
        ("x:<a>", {"a": True}),
        ("x:<a>", {"a": ["l"]}),
        ({"if": "a", "then": "x"}, {"a": True}),
        ({"for": "s", "in": "ss", "each": "x:<s>"}, {"ss": ["a"]}),
    ],
)
def test_render_refuses(template, params):
    with pytest.raises(ScopeTemplateError):
        render(template, params)


@pytest.mark.parametrize(
    ("scenario", "template", "params", "message"),
    [
        (
            "a parameter missing",
            "x:<a>",
            {},
            "Scope expression template expected parameter 'a' to be a string or number",
        ),
        (
            "an if template",
            {"if": "a", "then": "x"},
            {"a": True},
            "'if'/'for' templates are not used by worker-manager",
        ),
        (
            "a for template",
            {"for": "s", "in": "ss", "each": "x:<s>"},
            {"ss": ["a"]},
            "'if'/'for' templates are not used by worker-manager",
        ),
        ("a bare if", {"if": "a"}, {}, "'if' templates are not used by worker-manager"),
        ("a bare for", {"for": "a"}, {}, "'for' templates are not used by worker-manager"),
        ("an unknown operator", {"OneOf": ["a"]}, {}, "not a scope expression: {'OneOf': ['a']}"),
        ("operands not a list", {"AllOf": "a"}, {}, "not a scope expression: {'AllOf': 'a'}"),
        ("two operators", {"AllOf": [], "AnyOf": []}, {}, "not a scope expression: "),
        ("not an expression at all", 7, {}, "not a scope expression: 7"),
    ],
)
def test_what_a_refused_template_says(scenario, template, params, message):
    with pytest.raises(ScopeTemplateError) as refused:
        render(template, params)
    assert str(refused.value).startswith(message), scenario


@pytest.mark.parametrize(
    ("expr", "valid"),
    [
        ("a:b", True),
        ("tab\tin scope", False),
        ("café", False),
        ({"AllOf": ["a", {"AnyOf": []}]}, True),
        ({"AllOf": ["a"], "AnyOf": ["b"]}, False),
        ({"OneOf": ["a"]}, False),
        ({"AllOf": "a"}, False),
        (7, False),
    ],
)
def test_valid_expression(expr, valid):
    assert valid_expression(expr) is valid


# Parameters worker-manager's handlers take from the body or the query (WM src/api.js).
NON_ROUTE_PARAMS = {
    "createWorkerPool": {"providerId"},
    "updateWorkerPool": {"providerId"},
    "reportWorkerError": {"workerGroup", "workerId"},
    "workerPoolErrorStats": {"workerPoolId"},
    "reregisterWorker": {"workerPoolId", "workerGroup", "workerId"},
}


def test_every_worker_manager_endpoint_has_a_scope_entry_with_fillable_params():
    funcinfo = taskcluster.WorkerManager.funcinfo
    assert set(BY_NAME) == set(funcinfo)
    for name, template in ((name, row.scopes) for name, row in BY_NAME.items()):
        if template is None:
            continue
        assert valid_expression(render(template, dict.fromkeys(template_params(template), "x")))
        route_args = set(funcinfo[name]["args"])
        assert template_params(template) <= route_args | NON_ROUTE_PARAMS.get(name, set()), name
        # Taskcluster checks these before the handler runs, from the route alone.
        assert can_render_from(template, route_args) is (name not in NON_ROUTE_PARAMS), name
