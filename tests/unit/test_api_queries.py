"""Query strings as Taskcluster's API library parses and judges them, and listProviders' pages:
tables. Expected messages are Taskcluster's (TC `libraries/api/src/middleware/queries.js`)."""

from __future__ import annotations

import pytest

from wm.api.endpoint_table import BY_NAME
from wm.api.queries import check_query, query_problems
from wm.api.routers.providers import provider_page
from wm.tc.errors import TaskclusterError

WORKERS = BY_NAME["listWorkersForWorkerPool"].query


@pytest.mark.parametrize(
    ("query", "problems"),
    [
        ("", []),
        ("limit=10&continuationToken=abc&state=running&launchConfigId=lc-1", []),
        ("bewit=anything", []),
        ("+limit=1", ["Query-string parameter:  limit is not supported!"]),
        ("limit=1+", ['Query-string parameter: limit="1 " does not match expression: /^[0-9]+$/']),
        ("limit", ['Query-string parameter: limit="" does not match expression: /^[0-9]+$/']),
        ("continuationToken=%0A", [
            'Query-string parameter: continuationToken="\n" does not match expression: /./'
        ]),
        ("continuationToken=%0Ax", []),
        ("state=running&state=stopped", ["Query-string parameter: state must be a string!"]),
        ("b=1&a=2", [
            "Query-string parameter: b is not supported!",
            "Query-string parameter: a is not supported!",
        ]),
        # JavaScript lists an object's integer-like keys first, in ascending order.
        ("x=1&10=1&2=1", [
            "Query-string parameter: 2 is not supported!",
            "Query-string parameter: 10 is not supported!",
            "Query-string parameter: x is not supported!",
        ]),
        ("%6Cimit=x", ['Query-string parameter: limit="x" does not match expression: /^[0-9]+$/']),
        ("&&limit=5&&", []),
    ],
)  # fmt: skip
def test_query_strings_are_judged_as_taskcluster_judges_them(query, problems):
    assert query_problems(WORKERS, query) == problems


def test_a_refused_query_is_one_invalid_request_arguments_error():
    with pytest.raises(TaskclusterError) as refused:
        check_query(BY_NAME["ping"].query, "a=1&b=2")

    assert refused.value.code == "InvalidRequestArguments"
    assert refused.value.message == (
        "Query-string parameter: a is not supported!\nQuery-string parameter: b is not supported!"
    )


PROVIDERS = ["p0", "p1", "p2", "p3", "p4"]


@pytest.mark.parametrize(
    ("token", "limit", "page", "next_token"),
    [
        (None, None, PROVIDERS, None),  # 100 by default
        (None, "2", ["p0", "p1"], "2"),
        ("2", "2", ["p2", "p3"], "4"),
        ("4", "2", ["p4"], None),
        ("3", "2", ["p3", "p4"], None),  # a page that reaches the end has no token
        ("9", None, [], None),
        (None, "0", [], None),  # JavaScript: end = 0 is falsy, so no token either
    ],
)
def test_providers_are_paged_by_plain_offsets(token, limit, page, next_token):
    assert provider_page(PROVIDERS, token, limit) == (page, next_token)
