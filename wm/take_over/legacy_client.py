"""A legacy worker-manager's API, read through the `taskcluster` client for `wm import`.

Reads only: listWorkerPools and listWorkersForWorkerPool (one listing per imported state, so
the stopped rows worker-manager keeps until they expire are never paged through), every page
followed by its continuationToken. Answers become wm.take_over.import_plan's LegacyPool and
LegacyWorker; an unreachable or refusing API, or an answer missing what the import needs, is a
LegacyApiError naming the URL and the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import taskcluster
from taskcluster.exceptions import (
    TaskclusterAuthFailure,
    TaskclusterFailure,
    TaskclusterRestFailure,
)

from wm.errors import WmError
from wm.take_over.import_plan import IMPORTED_STATES, LegacyPool, LegacyWorker

CLIENT_MAX_RETRIES = 2
POOL_KEYS = ("providerId", "description", "owner", "emailOnError", "config")
# TC libraries/api express-error.js: what follows every error message.
ERROR_TRAILER = "\n\n---\n"


class LegacyApiError(WmError):
    """The legacy worker-manager could not be read: the URL and its answer."""


class LegacyClient:
    def __init__(
        self, root_url: str, client_id: str | None = None, access_token: str | None = None
    ) -> None:
        self.root_url = root_url.rstrip("/")
        options: dict[str, Any] = {"rootUrl": self.root_url, "maxRetries": CLIENT_MAX_RETRIES}
        if client_id and access_token:
            options["credentials"] = {"clientId": client_id, "accessToken": access_token}
        self._client = taskcluster.WorkerManager(options)

    def pools(self) -> list[LegacyPool]:
        """Every pool listWorkerPools answers, as createWorkerPool bodies."""
        url = self._url("worker-pools")
        found = []
        for page in self._pages(url, lambda query: self._client.listWorkerPools(query=query)):
            for entry in _items(page, "workerPools", url):
                pool_id = _field(entry, "workerPoolId", str, url)
                body = {key: entry[key] for key in POOL_KEYS if key in entry}
                found.append(LegacyPool(pool_id, _field(entry, "providerId", str, url), body))
        return found

    def workers(self, pool_ids: Sequence[str]) -> list[LegacyWorker]:
        """The workers of these pools that are not stopped."""
        found = []
        for pool_id in pool_ids:
            url = self._url(f"workers/{pool_id}")
            for state in IMPORTED_STATES:

                def call(query: dict[str, str], pool_id: str = pool_id, state: str = state) -> Any:
                    return self._client.listWorkersForWorkerPool(
                        pool_id, query={**query, "state": state}
                    )

                for page in self._pages(f"{url}?state={state}", call):
                    for entry in _items(page, "workers", url):
                        worker = _worker(entry, url)
                        # A stand-in that ignores the state filter is read the same.
                        if worker.state == state:
                            found.append(worker)
        return found

    def _url(self, path: str) -> str:
        return f"{self.root_url}/api/worker-manager/v1/{path}"

    def _pages(
        self, url: str, call: Callable[[dict[str, str]], Any]
    ) -> Iterator[Mapping[str, Any]]:
        token: str | None = None
        while True:
            query = {"continuationToken": token} if token else {}
            try:
                page = call(query)
            except (TaskclusterRestFailure, TaskclusterAuthFailure) as exc:
                code = exc.body.get("code") if isinstance(exc.body, Mapping) else None
                answer = f"{exc.status_code} {code}" if code else str(exc.status_code)
                raise LegacyApiError(
                    f"{url}: worker-manager answered {answer}: {_answered_message(exc)}"
                ) from exc
            except TaskclusterFailure as exc:
                raise LegacyApiError(f"{url}: cannot be reached: {_first_line(exc)}") from exc
            if not isinstance(page, Mapping):
                raise LegacyApiError(f"{url}: the answer is not a JSON object")
            yield page
            token = page.get("continuationToken")
            if not token:
                return


def _answered_message(exc: TaskclusterFailure) -> str:
    """The message an API error answered, whole but for the trailer Taskcluster appends to
    every one (method, code, status, time): an InsufficientScopes names the scopes missing
    and the expression required only after its first line."""
    message = str(exc).split(ERROR_TRAILER, 1)[0].strip()
    return message or type(exc).__name__


def _first_line(exc: Exception) -> str:
    # The client's messages carry no credentials; the first line says what happened.
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _items(page: Mapping[str, Any], key: str, url: str) -> list[Mapping[str, Any]]:
    items = page.get(key)
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise LegacyApiError(f"{url}: the answer has no list of objects {key!r}")
    return items


def _field(entry: Mapping[str, Any], key: str, kind: type, url: str) -> Any:
    value = entry.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise LegacyApiError(f"{url}: an entry's {key!r} is {value!r}, not a {kind.__name__}")
    return value


def _time(entry: Mapping[str, Any], key: str, url: str) -> datetime:
    text = _field(entry, key, str, url)
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise LegacyApiError(f"{url}: an entry's {key!r} is {text!r}, not a date-time") from exc


def _worker(entry: Mapping[str, Any], url: str) -> LegacyWorker:
    launch_config_id = entry.get("launchConfigId")
    return LegacyWorker(
        worker_pool_id=_field(entry, "workerPoolId", str, url),
        worker_group=_field(entry, "workerGroup", str, url),
        worker_id=_field(entry, "workerId", str, url),
        provider_id=_field(entry, "providerId", str, url),
        state=_field(entry, "state", str, url),
        capacity=_field(entry, "capacity", int, url),
        launch_config_id=launch_config_id if isinstance(launch_config_id, str) else None,
        created=_time(entry, "created", url),
        expires=_time(entry, "expires", url) if entry.get("expires") else None,
        last_modified=_time(entry, "lastModified", url),
    )
