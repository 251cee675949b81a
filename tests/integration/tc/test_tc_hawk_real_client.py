"""Requests signed by the real `taskcluster` client, verified by wm's Hawk code.

The client signs real HTTP requests to a capture server on 127.0.0.1; the captured method,
resource, Host, Authorization and body go to `wm.tc.hawk.authenticate`, as the web process will.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import taskcluster

from wm.tc.credentials import ISSUER_SCOPES, IssuerCredentials, worker_credentials
from wm.tc.hawk import (
    AuthenticationFailed,
    Client,
    HawkRequest,
    authenticate,
    issuing_client_id,
    request_host_port,
)
from wm.tc.scopes import satisfies

ISSUER = IssuerCredentials("static/taskcluster/worker-manager", "wm-issuer-token")
FAR = datetime(2100, 1, 1, tzinfo=UTC)
OPERATOR = Client("project/ops", "operator-token", ("worker-manager:list-workers:*",), FAR)
POOL, GROUP, WORKER = "proj-x/ci", "us-east-1", "i-0abc"
WORKER_NAME = f"worker/aws/{POOL}/{GROUP}/{WORKER}"


@dataclass(frozen=True)
class Captured:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _Capture(BaseHTTPRequestHandler):
    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.captured.append(  # type: ignore[attr-defined]
            Captured(self.command, self.path, dict(self.headers.items()), body)
        )
        reply = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_DELETE = do_PUT = _record

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def capture() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    server.captured = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def root_url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def last_request(server: ThreadingHTTPServer) -> HawkRequest:
    seen: Captured = server.captured[-1]  # type: ignore[attr-defined]
    host, port = request_host_port(seen.headers["Host"])
    return HawkRequest(
        method=seen.method,
        resource=seen.path,
        host=host,
        port=port,
        authorization=seen.headers.get("Authorization"),
        content=seen.body,
        content_type=seen.headers.get("Content-Type"),
    )


def load(client_id: str) -> Client | None:
    if client_id == ISSUER.client_id:
        return Client(ISSUER.client_id, ISSUER.access_token, ISSUER_SCOPES, FAR)
    if client_id == OPERATOR.client_id:
        return OPERATOR
    return None


def worker_creds(now: datetime, **changes) -> dict[str, str]:
    args = dict(
        provider_id="aws",
        worker_pool_id=POOL,
        worker_group=GROUP,
        worker_id=WORKER,
        expires=now + timedelta(days=4),
        now=now,
    )
    return worker_credentials(ISSUER, **(args | changes)).as_json()


def worker_manager(server, credentials, **options) -> taskcluster.WorkerManager:
    return taskcluster.WorkerManager(
        {"rootUrl": root_url(server), "credentials": credentials, "maxRetries": 0, **options}
    )


def reregister(server, credentials, **options) -> HawkRequest:
    body = {"workerPoolId": POOL, "workerGroup": GROUP, "workerId": WORKER, "secret": "s" * 44}
    worker_manager(server, credentials, **options).reregisterWorker(body)
    return last_request(server)


def test_a_worker_reregisters_with_the_credentials_wm_issued(capture):
    now = datetime.now(UTC)
    request = reregister(capture, worker_creds(now))

    who = authenticate(request, load, now=now)

    assert who.client_id == WORKER_NAME
    assert who.scheme == "hawk"
    assert satisfies(who.scopes, f"worker-manager:reregister-worker:{POOL}/{GROUP}/{WORKER}")
    assert "assume:anonymous" in who.scopes
    assert who.expires == now.replace(microsecond=now.microsecond // 1000 * 1000) + timedelta(
        days=4
    )
    assert issuing_client_id(request) == ISSUER.client_id


@pytest.mark.parametrize(
    "call",
    [
        lambda wm: wm.shouldWorkerTerminate(POOL, GROUP, WORKER),
        lambda wm: wm.removeWorker(POOL, GROUP, WORKER),
        lambda wm: wm.listWorkersForWorkerPool(POOL, query={"limit": 5, "state": "running"}),
        lambda wm: wm.reportWorkerError(
            POOL,
            {
                "workerGroup": GROUP,
                "workerId": WORKER,
                "kind": "worker-error",
                "title": "t",
                "description": "d",
                "extra": {},
            },
        ),
    ],
    ids=["GET with escaped pool id", "DELETE", "GET with a query", "POST with a body"],
)
def test_every_method_shape_verifies(capture, call):
    now = datetime.now(UTC)
    call(worker_manager(capture, worker_creds(now)))
    assert authenticate(last_request(capture), load, now=now).client_id == WORKER_NAME


def test_the_escaped_pool_id_is_signed_as_sent(capture):
    now = datetime.now(UTC)
    worker_manager(capture, worker_creds(now)).shouldWorkerTerminate(POOL, GROUP, WORKER)
    assert "proj-x%2Fci" in last_request(capture).resource


def test_permanent_credentials_verify_with_the_clients_own_scopes(capture):
    now = datetime.now(UTC)
    credentials = {"clientId": OPERATOR.client_id, "accessToken": OPERATOR.access_token}
    worker_manager(capture, credentials).listWorkersForWorkerPool(POOL)
    who = authenticate(last_request(capture), load, now=now)
    assert who.client_id == OPERATOR.client_id
    assert set(who.scopes) == {"worker-manager:list-workers:*", "assume:anonymous"}
    assert issuing_client_id(last_request(capture)) == OPERATOR.client_id


def test_authorized_scopes_restrict_what_the_request_may_do(capture):
    now = datetime.now(UTC)
    only = [f"worker-manager:should-worker-terminate:{POOL}/{GROUP}/{WORKER}"]
    request = reregister(capture, worker_creds(now), authorizedScopes=only)
    who = authenticate(request, load, now=now)
    assert set(who.scopes) == {*only, "assume:anonymous"}
    assert not satisfies(who.scopes, f"worker-manager:reregister-worker:{POOL}/{GROUP}/{WORKER}")


def test_authorized_scopes_beyond_the_credentials_are_refused(capture):
    now = datetime.now(UTC)
    request = reregister(capture, worker_creds(now), authorizedScopes=["worker-manager:*"])
    with pytest.raises(AuthenticationFailed, match="do not satisfy authorizedScopes"):
        authenticate(request, load, now=now)


def test_a_signed_url_bewit_verifies_and_expires(capture):
    now = datetime.now(UTC)
    url = worker_manager(capture, worker_creds(now)).buildSignedUrl(
        "shouldWorkerTerminate", POOL, GROUP, WORKER, expiration=600
    )
    requests.get(url, timeout=10)
    request = last_request(capture)
    assert request.authorization is None and "bewit=" in request.resource

    assert authenticate(request, load, now=now).client_id == WORKER_NAME
    assert issuing_client_id(request) == ISSUER.client_id
    with pytest.raises(AuthenticationFailed, match="Access expired"):
        authenticate(request, load, now=now + timedelta(seconds=601))


def test_without_credentials_the_request_is_anonymous(capture):
    now = datetime.now(UTC)
    worker_manager(capture, {}).listWorkerPools()
    who = authenticate(last_request(capture), load, now=now)
    assert (who.client_id, who.scheme, who.scopes) == (None, "none", ("assume:anonymous",))
    assert who.expires == now + timedelta(minutes=15)


def forge_mac(request: HawkRequest) -> HawkRequest:
    header = request.authorization
    start = header.index('mac="') + len('mac="')
    flipped = "A" if header[start] != "A" else "B"
    return replace(request, authorization=header[:start] + flipped + header[start + 1 :])


def with_certificate(credentials: dict[str, str], **changes) -> dict[str, str]:
    cert = json.loads(credentials["certificate"]) | changes
    return credentials | {"certificate": json.dumps(cert)}


REFUSALS = [
    ("a forged MAC", lambda now: worker_creds(now), forge_mac, "Bad mac"),
    (
        "a token guessed for the worker",
        lambda now: worker_creds(now) | {"accessToken": "x" * 43},
        None,
        "Bad mac",
    ),
    (
        "a certificate signed with another token",
        lambda now: worker_credentials(
            IssuerCredentials(ISSUER.client_id, "stolen-guess"),
            provider_id="aws",
            worker_pool_id=POOL,
            worker_group=GROUP,
            worker_id=WORKER,
            expires=now + timedelta(days=1),
            now=now,
        ).as_json(),
        None,
        "ext.certificate.signature is not valid",
    ),
    (
        "an expired certificate",
        lambda now: worker_creds(now - timedelta(days=5)),
        None,
        "ext.certificate.expiry < now",
    ),
    (
        "scopes widened in the certificate",
        lambda now: with_certificate(worker_creds(now), scopes=["worker-manager:remove-worker:*"]),
        None,
        "ext.certificate.signature is not valid",
    ),
    (
        "the certificate renamed to another worker",
        lambda now: worker_creds(now) | {"clientId": f"worker/aws/{POOL}/{GROUP}/i-other"},
        None,
        "ext.certificate.signature is not valid, or wrong clientId provided",
    ),
    (
        "an unknown issuer",
        lambda now: with_certificate(worker_creds(now), issuer="someone/else"),
        None,
        "Client with clientId 'someone/else' not found",
    ),
    (
        "a body changed after signing",
        lambda now: worker_creds(now),
        lambda r: replace(r, content=r.content.replace(b"i-0abc", b"i-0abd")),
        "Invalid payload hash",
    ),
    (
        "a path changed after signing",
        lambda now: worker_creds(now),
        lambda r: replace(r, resource=r.resource.replace("reregister", "register")),
        "Bad mac",
    ),
    (
        "another port than the one signed",
        lambda now: worker_creds(now),
        lambda r: replace(r, port=r.port + 1),
        "Bad mac",
    ),
]


@pytest.mark.parametrize(
    ("scenario", "credentials", "alter", "reason"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_bad_credentials_are_refused_with_a_reason(capture, scenario, credentials, alter, reason):
    now = datetime.now(UTC)
    request = reregister(capture, credentials(now))
    if alter is not None:
        request = alter(request)
    with pytest.raises(AuthenticationFailed, match=reason):
        authenticate(request, load, now=now)


@pytest.mark.parametrize(
    ("skew", "accepted"),
    [
        (timedelta(minutes=14), True),
        (-timedelta(minutes=14), True),
        (timedelta(minutes=16), False),
        (-timedelta(minutes=16), False),
    ],
)
def test_the_clock_may_differ_by_fifteen_minutes(capture, skew, accepted):
    now = datetime.now(UTC)
    request = reregister(capture, worker_creds(now))
    if accepted:
        assert authenticate(request, load, now=now + skew).client_id == WORKER_NAME
    else:
        with pytest.raises(AuthenticationFailed, match="Stale timestamp"):
            authenticate(request, load, now=now + skew)
