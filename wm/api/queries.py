"""Query-string parameters, checked as Taskcluster's API library does, and their patterns.

Sources (taskcluster/taskcluster @ 9d59eb59): the patterns are in WM `src/api.js` and
`libraries/api/src/pagination.js` (`paginateResults.query`); which endpoint accepts which is
the endpoint table's (wm/api/endpoint_table.py, after `generated/references.json`); the check is
`libraries/api/src/middleware/queries.js`: every parameter must be declared (`bewit` is always
allowed: it carries a Hawk signature), must appear once (Express 5 parses the query with Node's
`querystring`, which makes a repeated key an array) and must match its pattern. Every problem is
one line of the `InvalidRequestArguments` message, in the order the parameters come.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from wm.tc.errors import TaskclusterError

BEWIT = "bewit"
# JavaScript orders an object's integer-like keys first (ascending), then the rest as inserted.
_ARRAY_INDEX_MAX = 2**32 - 2


@dataclass(frozen=True)
class QueryPattern:
    """A parameter's pattern: as JavaScript prints it (for the message) and the same test in
    Python (`$` becomes `\\Z`: Python's `$` also matches before a final newline; `.` excludes
    JavaScript's line terminators)."""

    shown: str
    regex: re.Pattern[str]

    def accepts(self, value: str) -> bool:
        return self.regex.search(value) is not None


def _pattern(shown: str, python: str) -> QueryPattern:
    return QueryPattern(shown, re.compile(python))


# paginateResults.query
_LIMIT = _pattern("/^[0-9]+$/", r"^[0-9]+\Z")
PAGES = {"continuationToken": _pattern("/./", "[^\n\r\u2028\u2029]"), "limit": _LIMIT}
# listProviders pages by plain offsets, not paginateResults: its own patterns.
PROVIDER_PAGES = {"continuationToken": _pattern("/^[0-9]+$/", r"^[0-9]+\Z"), "limit": _LIMIT}
# WM api.js, by endpoint: launchConfigIdQuery, and each endpoint's own.
LAUNCH_CONFIG = {"launchConfigId": _pattern("/^[a-zA-Z0-9-]{1,38}$/", r"^[a-zA-Z0-9-]{1,38}\Z")}
INCLUDE_ARCHIVED = {"includeArchived": _pattern("/^(true|false)$/", r"^(true|false)\Z")}
WORKER_POOL_ID = {"workerPoolId": _pattern("/^([a-zA-Z0-9/-]+)?$/", r"^([a-zA-Z0-9/-]+)?\Z")}
ERROR_ID = {"errorId": _pattern("/^[a-zA-Z0-9-_]+$/", r"^[a-zA-Z0-9\-_]+\Z")}
STATE = {
    "state": _pattern(
        "/^(requested|running|stopping|stopped|standalone)$/",
        r"^(requested|running|stopping|stopped|standalone)\Z",
    )
}
# listWorkers' (which wm does not serve: during a take-over it is forwarded).
QUARANTINED = {"quarantined": _pattern("/^(true|false)$/", r"^(true|false)\Z")}
WORKER_STATE = {
    "workerState": _pattern(
        "/^(requested|running|stopping|stopped)$/", r"^(requested|running|stopping|stopped)\Z"
    )
}


def check_query(accepted: Mapping[str, QueryPattern], query_string: str) -> None:
    """Raise `InvalidRequestArguments` naming every parameter not `accepted`, or not as it is."""
    problems = query_problems(accepted, query_string)
    if problems:
        raise TaskclusterError("InvalidRequestArguments", "\n".join(problems))


def query_problems(accepted: Mapping[str, QueryPattern], query_string: str) -> list[str]:
    problems = []
    for key, values in _parsed(query_string).items():
        pattern = accepted.get(key)
        if pattern is None:
            if key != BEWIT:
                problems.append(f"Query-string parameter: {key} is not supported!")
        elif len(values) != 1:
            problems.append(f"Query-string parameter: {key} must be a string!")
        elif not pattern.accepts(values[0]):
            problems.append(
                f'Query-string parameter: {key}="{values[0]}" does not match expression: '
                f"{pattern.shown}"
            )
    return problems


def _parsed(query_string: str) -> dict[str, list[str]]:
    """Node's `querystring.parse`, keys in the order `Object.entries` gives them."""
    values: dict[str, list[str]] = {}
    for key, value in parse_qsl(query_string, keep_blank_values=True, errors="replace"):
        values.setdefault(key, []).append(value)
    indices = sorted((k for k in values if _array_index(k)), key=int)
    return {k: values[k] for k in [*indices, *(k for k in values if not _array_index(k))]}


def _array_index(key: str) -> bool:
    return key.isascii() and key.isdigit() and str(int(key)) == key and int(key) <= _ARRAY_INDEX_MAX
