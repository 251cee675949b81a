"""The query-string parameters each endpoint accepts, checked as Taskcluster's API library does.

Sources (taskcluster/taskcluster @ 9d59eb59): the names per endpoint are the `query` fields of
`generated/references.json` → `references/worker-manager/v1/api.json`; the patterns are in
WM `src/api.js` and `libraries/api/src/pagination.js` (`paginateResults.query`); the check is
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
_TOKEN = _pattern("/./", "[^\n\r\u2028\u2029]")
_LIMIT = _pattern("/^[0-9]+$/", r"^[0-9]+\Z")
_PAGES = {"continuationToken": _TOKEN, "limit": _LIMIT}
# WM api.js launchConfigIdQuery
_LAUNCH_CONFIG = {"launchConfigId": _pattern("/^[a-zA-Z0-9-]{1,38}$/", r"^[a-zA-Z0-9-]{1,38}\Z")}

ENDPOINT_QUERIES: Mapping[str, Mapping[str, QueryPattern]] = {
    "ping": {},
    "lbheartbeat": {},
    "version": {},
    "heartbeat": {},
    # listProviders pages by plain offsets, not paginateResults: its own patterns.
    "listProviders": {
        "continuationToken": _pattern("/^[0-9]+$/", r"^[0-9]+\Z"),
        "limit": _LIMIT,
    },
    "createWorkerPool": {},
    "updateWorkerPool": {},
    "deleteWorkerPool": {},
    "listWorkerPoolLaunchConfigs": {
        **_PAGES,
        "includeArchived": _pattern("/^(true|false)$/", r"^(true|false)\Z"),
    },
    "workerPoolStats": {},
    "workerPool": {},
    "listWorkerPools": _PAGES,
    "listWorkerPoolsStats": _PAGES,
    "reportWorkerError": {},
    "workerPoolErrorStats": {
        "workerPoolId": _pattern("/^([a-zA-Z0-9/-]+)?$/", r"^([a-zA-Z0-9/-]+)?\Z")
    },
    "listWorkerPoolErrors": {
        **_PAGES,
        **_LAUNCH_CONFIG,
        "errorId": _pattern("/^[a-zA-Z0-9-_]+$/", r"^[a-zA-Z0-9\-_]+\Z"),
    },
    "listWorkersForWorkerGroup": _PAGES,
    "worker": {},
    "removeWorker": {},
    "shouldWorkerTerminate": {},
    "listWorkersForWorkerPool": {
        **_PAGES,
        **_LAUNCH_CONFIG,
        "state": _pattern(
            "/^(requested|running|stopping|stopped|standalone)$/",
            r"^(requested|running|stopping|stopped|standalone)\Z",
        ),
    },
    "createWorker": {},
    "updateWorker": {},
    "registerWorker": {},
    "reregisterWorker": {},
}


def check_query(endpoint: str, query_string: str) -> None:
    """Raise `InvalidRequestArguments` naming every parameter `endpoint` does not accept."""
    problems = query_problems(ENDPOINT_QUERIES[endpoint], query_string)
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
