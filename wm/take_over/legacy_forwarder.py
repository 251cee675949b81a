"""The legacy worker-manager behind a take-over (`[take_over] legacy_url`): requests forwarded to
it unchanged, and the reads of its side of the merged lists.

A forwarded request keeps its method, path, query, body bytes and headers (Host and the Hawk
Authorization header included, so the legacy checks the client's own signature as if the
client had called it), and its answer comes back as the legacy gave it. The merged lists read
the legacy's side with wm's own Taskcluster client (the deployment's worker-manager client):
their query is not the client's, so the client's signature cannot be passed on, and wm has
already checked that the client may list. Every call has a deadline: a legacy that does not
answer is Taskcluster's 5xx naming it, never a hang.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import mohawk

from wm.tc.credentials import IssuerCredentials
from wm.tc.errors import ERROR_STATUS, TaskclusterError

CONNECT_TIMEOUT_S = 5.0
# registerWorker at the legacy checks a proof, which may call its cloud: give it the time
# worker-runner gives a call.
ANSWER_TIMEOUT_S = 30.0
# Hop-by-hop headers (RFC 9110 7.6.1) belong to one connection, not to the request.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


# What the web server writes on every answer itself: the legacy's would come out twice.
OWN_HEADERS = frozenset({"content-length", "date", "server"})


class _Refused(TaskclusterError):
    """The legacy refused wm's client (401/403): the read is tried once more, anonymously."""


class LegacyUnavailable(TaskclusterError):
    """The legacy worker-manager did not answer in time, or not at all."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class LegacyForwarder:
    """The legacy worker-manager at `base_url`; one connection pool for the process."""

    def __init__(
        self,
        base_url: str,
        credentials: IssuerCredentials | None,
        *,
        timeout_s: float = ANSWER_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._credentials = credentials
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s)),
            follow_redirects=False,
            transport=transport,
            trust_env=False,  # no proxy from the environment between wm and its legacy
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def forward(
        self, method: str, target: str, headers: Iterable[tuple[bytes, bytes]], body: bytes
    ) -> Answer:
        """The request as the client sent it (`target`: raw path and query) and the legacy's
        answer, both unchanged but for hop-by-hop headers (the body is re-framed)."""
        sent = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in headers
            if k.lower().decode("latin-1") not in HOP_BY_HOP | {"content-length"}
        ]
        request = self._client.build_request(method, self.base_url + target, content=body)
        # build_request adds its own Host and Content-Length: put the client's headers back
        # exactly (Host is part of what Hawk signed).
        request.headers = httpx.Headers(sent)
        if body or method.upper() in ("POST", "PUT", "PATCH"):
            request.headers["Content-Length"] = str(len(body))
        try:
            response = await self._client.send(request, stream=True)
            try:
                content = b"".join([chunk async for chunk in response.aiter_raw()])
            finally:
                await response.aclose()
        except httpx.HTTPError as error:
            raise self._unavailable(error) from None
        kept = [
            (k, v)
            for k, v in response.headers.raw
            if k.lower().decode("latin-1") not in HOP_BY_HOP | OWN_HEADERS
        ]
        return Answer(response.status_code, kept, content)

    async def read(self, path: str, query: Mapping[str, str]) -> dict[str, Any]:
        """GET `path` (below the rootUrl) with `query`, signed as wm's client when it has one
        (anonymously if the legacy refuses that client): the legacy's JSON answer, or its
        Taskcluster error raised as such."""
        url = self.base_url + path + (f"?{urlencode(query)}" if query else "")
        if self._credentials is None:
            return await self._read(url, {})
        try:
            return await self._read(url, self._signed(url))
        except _Refused:
            # worker-manager's own client holds no list scopes (TC auth static-scopes.json):
            # what the deployment's anonymous role grants (community-tc's grants the lists)
            # may be enough.
            return await self._read(url, {})

    def _signed(self, url: str) -> dict[str, str]:
        assert self._credentials is not None
        sender = mohawk.Sender(
            {
                "id": self._credentials.client_id,
                "key": self._credentials.access_token,
                "algorithm": "sha256",
            },
            url,
            "GET",
            content="",
            content_type="",
            always_hash_content=False,
        )
        return {"Authorization": sender.request_header}

    async def _read(self, url: str, headers: Mapping[str, str]) -> dict[str, Any]:
        try:
            response = await self._client.get(url, headers=dict(headers))
        except httpx.HTTPError as error:
            raise self._unavailable(error) from None
        try:
            answer = response.json()
        except (ValueError, UnicodeDecodeError):
            answer = None
        if not isinstance(answer, dict):
            raise LegacyUnavailable(
                "InternalServerError",
                f"the legacy worker-manager at {self.base_url} answered {response.status_code} "
                "without a JSON object",
            )
        if response.status_code >= 400:
            code = answer.get("code")
            if code not in ERROR_STATUS:
                code = "InternalServerError"
            error = _Refused if headers and response.status_code in (401, 403) else TaskclusterError
            raise error(
                code,
                f"the legacy worker-manager at {self.base_url}: "
                f"{answer.get('message') or json.dumps(answer)[:200]}",
            )
        return answer

    def _unavailable(self, error: httpx.HTTPError) -> LegacyUnavailable:
        what = "did not answer in time" if isinstance(error, httpx.TimeoutException) else "failed"
        return LegacyUnavailable(
            "InternalServerError",
            f"the legacy worker-manager at {self.base_url} {what}: {type(error).__name__}",
        )
