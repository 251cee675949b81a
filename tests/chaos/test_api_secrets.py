"""Re-registration abuse and where secrets go, against the real web process (issue 9, item 13).

Wrong, old, malformed and borrowed secrets and credentials, stopped and expired workers: always a
4xx, never a 5xx, and nothing changes. Then the whole database and everything the web process
logged are searched for every secret and access token it handed out and every proof it was sent:
a secret may only ever be stored as its hash, an access token not at all, and none may appear in
a log line.
"""

from __future__ import annotations

import gzip
import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from tests.support.api_stack import (
    KINDS,
    OPERATOR_TOKEN,
    POOLS,
    PREFIX,
    ApiStack,
    module_api,
    secret_hash,
)
from wm.api.models import RegisterWorkerRequest, ReregisterWorkerRequest
from wm.model import WorkerRecord

REREGISTER = f"{PREFIX}/worker/reregister"


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("secrets")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


@pytest.fixture(scope="module")
def handed_out() -> dict[str, list[str]]:
    """Every secret the API handed out and every proof it was sent in this module."""
    return {"secrets": [], "proofs": []}


def registered(
    api: ApiStack, kind: str, handed_out: dict
) -> tuple[WorkerRecord, str, dict[str, str]]:
    """A registered worker, its secret and its Taskcluster credentials."""
    (worker,) = api.launch(kind, 1)
    proof = api.proof(worker)
    handed_out["proofs"].extend(str(v) for v in proof.values() if len(str(v)) > 40)
    reply = api.register(worker, proof)
    assert reply.status == 200, reply.body
    answer = reply.json()
    handed_out["secrets"] += [answer["secret"], answer["credentials"]["accessToken"]]
    return worker, answer["secret"], answer["credentials"]


def reregister_body(worker: WorkerRecord, secret: Any, **changes: Any) -> dict[str, Any]:
    body = {
        "workerPoolId": worker.pool_id,
        "workerGroup": worker.worker_group,
        "workerId": worker.tc_worker_id,
        "secret": secret,
    }
    body.update(changes)
    return body


def worker_path(worker: WorkerRecord) -> str:
    pool = worker.pool_id.replace("/", "%2F")
    return f"{PREFIX}/workers/{pool}/{worker.worker_group}/{worker.tc_worker_id}"


def errors_path(worker: WorkerRecord) -> str:
    return f"{PREFIX}/worker-pool-errors/{worker.pool_id.replace('/', '%2F')}"


def unchanged(api: ApiStack, worker: WorkerRecord, before: dict[str, Any]) -> bool:
    return api.row(worker.worker_id) == before


@pytest.mark.parametrize("kind", KINDS)
def test_reregistration_abuse_is_always_4xx_and_changes_nothing(
    api: ApiStack, kind: str, handed_out: dict
):
    worker, secret, mine = registered(api, kind, handed_out)
    other, other_secret, _ = registered(api, kind, handed_out)
    before = api.row(worker.worker_id)
    another_pool = next(pool for other_kind, pool in POOLS.items() if other_kind != kind)
    abuse = {
        "wrong secret": reregister_body(worker, "n" * 44),
        "another worker's secret": reregister_body(worker, other_secret),
        "the operator token": reregister_body(worker, OPERATOR_TOKEN),
        "the secret's hash": reregister_body(worker, secret_hash(secret)),
        "secret with a space": reregister_body(worker, f" {secret}"),
        "empty secret": reregister_body(worker, ""),
        "oversized secret": reregister_body(worker, secret * 10),
        "secret as a number": reregister_body(worker, 12345),
        "secret as null": reregister_body(worker, None),
        "secret as a list": reregister_body(worker, [secret]),
        "secret with NUL": reregister_body(worker, secret + "\x00"),
        "no secret": {k: v for k, v in reregister_body(worker, secret).items() if k != "secret"},
        "right secret, another pool": reregister_body(worker, secret, workerPoolId=another_pool),
        "right secret, unknown pool": reregister_body(worker, secret, workerPoolId="no/such"),
        "right secret, another group": reregister_body(worker, secret, workerGroup="elsewhere"),
        "right secret, another worker": reregister_body(other, secret),
        "right secret, unknown worker": reregister_body(worker, secret, workerId="i-nobody"),
        "an extra field": {**reregister_body(worker, secret), "state": "running"},
    }
    for scenario, body in abuse.items():
        for signed in (True, False):
            reply = (
                api.signed(mine, "POST", REREGISTER, body) if signed else api.post(REREGISTER, body)
            )
            assert 400 <= reply.status < 500, (scenario, reply.status, reply.body)
            assert "secret" not in reply.json() or reply.status != 200, scenario
            assert unchanged(api, worker, before), scenario
    raw_abuse = {
        "not JSON": b"{secret",
        "JSON array": b"[]",
        "invalid UTF-8": b'{"secret": "\xff"}',
        "deeply nested": b'{"secret": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    }
    for scenario, raw in raw_abuse.items():
        reply = api.signed(mine, "POST", REREGISTER, raw=raw)
        assert reply.status == 400, (scenario, reply.body)
    assert unchanged(api, worker, before)
    # And the worker's own secret still works (the abuse did not lock it out).
    fine = api.signed(mine, "POST", REREGISTER, reregister_body(worker, secret))
    assert fine.status == 200
    handed_out["secrets"] += [fine.json()["secret"], fine.json()["credentials"]["accessToken"]]


def test_an_old_secret_stops_working_once_rotated(api: ApiStack, handed_out: dict):
    worker, first, mine = registered(api, "aws", handed_out)
    rotated = api.signed(mine, "POST", REREGISTER, reregister_body(worker, first))
    assert rotated.status == 200
    second = rotated.json()["secret"]
    handed_out["secrets"] += [second, rotated.json()["credentials"]["accessToken"]]
    before = api.row(worker.worker_id)
    assert before["secret_hash"] == secret_hash(second) != secret_hash(first)

    old = api.signed(mine, "POST", REREGISTER, reregister_body(worker, first))
    assert (old.status, old.json()["code"]) == (400, "InputError")
    assert unchanged(api, worker, before)


def test_a_stopped_worker_cannot_reregister(api: ApiStack, handed_out: dict):
    worker, secret, mine = registered(api, "gcp", handed_out)
    assert api.signed(mine, "DELETE", worker_path(worker)).status == 200
    stopping = api.row(worker.worker_id)
    assert stopping["state"] == "stopping" and stopping["secret_hash"] is None

    reply = api.signed(mine, "POST", REREGISTER, reregister_body(worker, secret))
    assert (reply.status, reply.json()["code"]) == (400, "InputError")
    again = api.signed(mine, "DELETE", worker_path(worker))
    assert again.status == 200  # removing a stopping worker changes nothing
    terminate = api.signed(mine, "GET", worker_path(worker) + "/should-terminate").json()
    assert terminate["terminate"] is True
    assert api.row(worker.worker_id) == stopping


def test_a_worker_past_its_reregistration_deadline_cannot_reregister(
    api: ApiStack, handed_out: dict
):
    worker, secret, mine = registered(api, "azure", handed_out)
    with api.engine.begin() as conn:
        conn.execute(
            text("UPDATE workers SET expires = now() - interval '1 second' WHERE worker_id = :w"),
            {"w": worker.worker_id},
        )
    before = api.row(worker.worker_id)
    reply = api.signed(mine, "POST", REREGISTER, reregister_body(worker, secret))
    assert (reply.status, reply.json()["code"]) == (400, "InputError")
    assert unchanged(api, worker, before)


@pytest.mark.parametrize(
    "authorization",
    [
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "bearer " + "x" * 4000,
        "Bearer \u00e9\u00e8",
        "Bearer a b c",
        'Hawk id="x"',
        'Hawk id="static/wm", ts="1", nonce="n", mac="m"',
        'Hawk id="static/wm-operator", ts="junk", nonce="n", mac="m", ext="@@@"',
    ],
)
def test_malformed_authorization_headers_are_4xx(
    api: ApiStack, handed_out: dict, authorization: str
):
    worker, _secret, _ = registered(api, "aws", handed_out)
    before = api.row(worker.worker_id)
    headers = {"Authorization": authorization.encode("utf-8").decode("latin-1")}
    report = {
        "workerGroup": worker.worker_group,
        "workerId": worker.tc_worker_id,
        "kind": "x",
        "title": "x",
        "description": "",
        "extra": {},
    }
    for method, path, body in (
        ("GET", worker_path(worker) + "/should-terminate", None),
        ("DELETE", worker_path(worker), None),
        ("POST", errors_path(worker), report),
        ("GET", f"{PREFIX}/worker-pools", None),
    ):
        reply = api.call(method, path, body, headers=headers)
        assert 400 <= reply.status < 500, (path, reply.status, reply.body)
    assert unchanged(api, worker, before)


def test_secrets_and_proofs_are_never_stored_in_clear_nor_logged(api: ApiStack, handed_out: dict):
    # Runs last in this module: what the tests above handed out and were sent in this process
    # is checked too. pytest-xdist may have run some of them in another worker: registrations
    # of its own make up the rest.
    kinds = iter(KINDS * 10)
    while len(handed_out["secrets"]) < 20 or len(handed_out["proofs"]) < 5:
        registered(api, next(kinds), handed_out)
    secrets, proofs = handed_out["secrets"], handed_out["proofs"]
    stored = api.all_stored_text()
    logged = api.log_text()
    # The process logged every request that handed out a secret and its access token (a
    # registration or reregistration): their absence from the log below means something.
    handing_out = [
        fields
        for fields in (json.loads(line) for line in logged.splitlines() if line.startswith("{"))
        if fields.get("route") in (f"{PREFIX}/worker/register", REREGISTER)
        and fields.get("status") == 200
    ]
    assert len(handing_out) >= len(secrets) // 2
    for secret in secrets:
        assert secret not in stored and secret not in logged
    for proof in proofs:
        assert proof not in stored and proof not in logged
        assert proof[:60] not in logged  # not even a prefix of a document or token
    with api.engine.connect() as conn:
        hashes = conn.execute(
            text("SELECT secret_hash FROM workers WHERE secret_hash IS NOT NULL")
        ).scalars()
        assert {h for h in hashes} <= {secret_hash(s) for s in secrets}
        (key,) = conn.execute(text("SELECT secret FROM deployment_keys")).scalars()
    assert key not in logged  # the deployment key signs every certificate: never logged
    for line in logged.splitlines():
        if line.startswith("{"):
            fields = json.loads(line)
            assert not {"secret", "workerIdentityProof", "authorization"} & set(fields)


def test_request_models_keep_secrets_and_proofs_out_of_their_reprs():
    # A traceback's locals and a Sentry event show objects by their repr.
    secret, proof = "s3cr3t-value-for-repr".ljust(44, "x"), {"token": "proof-value-for-repr"}
    body = ReregisterWorkerRequest(workerPoolId="p/q", workerGroup="g", workerId="w", secret=secret)
    register = RegisterWorkerRequest(
        workerPoolId="p/q",
        providerId="x",
        workerGroup="g",
        workerId="w",
        workerIdentityProof=proof,
    )
    for shown in (repr(body), str(body), repr(register), str(register)):
        assert secret not in shown and "proof-value-for-repr" not in shown


SENTRY_PROBE = """
import sys
import logging
import sentry_sdk
from wm.ops.sentry import init_sentry
from wm.ops.telemetry import log

init_sentry(sys.argv[1], "web")


def verify(document, signature):
    secret = "SECRET-MARKER"
    raise ValueError("a verifier bug")


try:
    verify("PROOF-MARKER-DOCUMENT", "PROOF-MARKER-SIGNATURE")
except ValueError as exc:
    log("api-error", logging.ERROR, exc_info=exc, route="/api/worker-manager/v1/worker/register")
sentry_sdk.flush(timeout=10)
"""


def test_an_error_sent_to_sentry_carries_no_proof_or_secret(tmp_path):
    """Sentry shows a stack's local variables unless told not to; wm's frames hold proofs and
    secrets under names its scrubber does not know. A real event, to a local listener."""
    received: list[bytes] = []

    class Sentry(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            received.append(body)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sentry)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        dsn = f"http://publickey@127.0.0.1:{server.server_address[1]}/1"
        done = subprocess.run(
            [sys.executable, "-c", SENTRY_PROBE, dsn], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
        server.server_close()
    sent = b"".join(received)
    assert b"a verifier bug" in sent and b"verify" in sent  # the event, with its stack
    assert b"PROOF-MARKER" not in sent and b"SECRET-MARKER" not in sent
