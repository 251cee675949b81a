"""Bad input everywhere else (issue 9, item 15): every API endpoint of the real web process and
every `wm` command, given malformed bodies, oversized payloads, unknown pools and providers,
control characters and malformed configuration. Each must be a clear error that names what is
wrong (a 4xx Problem {code, message}; a message and exit code 2 for commands, no traceback) and
must write nothing: the whole database is compared before and after.

Already covered elsewhere, not repeated here: a broken config file's every problem listed by
`wm config check`, `wm pools sync` and `wm db upgrade` with nothing written, and unknown pools
for `wm tasks submit` and `wm pools errors` (tests/acceptance/test_cli.py); oversized and
non-JSON bodies with a stand-in verifier (tests/integration/api/test_worker_api.py).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from tests.support.api_stack import (
    OPERATOR_TOKEN,
    POOLS,
    ApiStack,
    module_api,
)
from tests.support.stack import REPO
from wm.api.app import MAX_BODY_BYTES
from wm.model import WorkerRecord

REGISTER = "/api/v1/workers/register"
REREGISTER = "/api/v1/workers/reregister"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("bad-input")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


@pytest.fixture(scope="module")
def waiting(api: ApiStack) -> WorkerRecord:
    """A worker waiting to register: the target of bodies that are otherwise right."""
    (worker,) = api.launch("aws", 1)
    return worker


@pytest.fixture(scope="module")
def running(api: ApiStack) -> tuple[WorkerRecord, str]:
    """A registered worker and its secret."""
    (worker,) = api.launch("gcp", 1)
    reply = api.register(worker, api.proof(worker))
    assert reply.status == 200
    return worker, reply.json()["secret"]


def is_problem(body: bytes) -> bool:
    try:
        found = json.loads(body)
    except ValueError:
        return False
    return (
        isinstance(found, dict)
        and set(found) == {"code", "message"}
        and all(isinstance(v, str) and v for v in found.values())
    )


def refused(
    api: ApiStack, method: str, path: str, body: Any = None, **kwargs: Any
) -> tuple[int, dict[str, str]]:
    """Send; the answer must be a 4xx Problem and the database unchanged. (status, problem)"""
    before = api.all_stored_text()
    reply = api.call(method, path, body, **kwargs)
    assert 400 <= reply.status < 500, (method, path, reply.status, reply.body)
    assert is_problem(reply.body), reply.body
    assert api.all_stored_text() == before, (method, path)
    return reply.status, reply.json()


# -- registration bodies ----------------------------------------------------------------------


def register_cases(worker: WorkerRecord) -> dict[str, tuple[Any, int, str, str]]:
    """name -> (body, status, code, what the message must name)."""
    good = {
        "pool_id": worker.pool_id,
        "provider_id": worker.provider_id,
        "worker_group": worker.worker_group,
        "worker_id": worker.worker_id,
        "identity_proof": {"document": "{}", "signature": "c2ln"},
    }
    nul, newline = "w\x00x", "w\nx"
    return {
        "unknown pool": ({**good, "pool_id": "no/such"}, 404, "unknown-pool", "no/such"),
        "unknown provider": (
            {**good, "provider_id": "nope"},
            400,
            "provider-mismatch",
            "provider",
        ),
        "another pool's provider": (
            {**good, "provider_id": "gcp-sim"},
            400,
            "provider-mismatch",
            "provider",
        ),
        "unknown worker": ({**good, "worker_id": "wnobody"}, 404, "unknown-worker", "wnobody"),
        "another pool's worker": (
            {**good, "pool_id": POOLS["gcp"]},
            404,
            "unknown-worker",
            worker.worker_id,
        ),
        "unknown group": ({**good, "worker_group": "mars-1"}, 400, "group-mismatch", "group"),
        "missing field": (
            {k: v for k, v in good.items() if k != "worker_id"},
            400,
            "bad-request",
            "worker_id: Field required",
        ),
        "unknown field": ({**good, "state": "running"}, 400, "bad-request", "state"),
        "id of the wrong type": ({**good, "pool_id": 5}, 400, "bad-request", "pool_id"),
        "id too long": ({**good, "worker_id": "w" * 201}, 400, "bad-request", "worker_id"),
        "empty id": ({**good, "worker_group": ""}, 400, "bad-request", "worker_group"),
        "NUL in the pool id": (
            {**good, "pool_id": nul},
            400,
            "bad-request",
            "pool_id: must not contain control characters",
        ),
        "NUL in the worker id": ({**good, "worker_id": nul}, 400, "bad-request", "worker_id"),
        "newline in the group": ({**good, "worker_group": newline}, 400, "bad-request", "group"),
        "NUL in the provider id": ({**good, "provider_id": nul}, 400, "bad-request", "provider"),
        "proof not an object": (
            {**good, "identity_proof": "a string"},
            400,
            "bad-request",
            "identity_proof",
        ),
        "a JSON array": ([good], 400, "bad-request", "(top level)"),
        "a JSON number": (5, 400, "bad-request", "(top level)"),
        "JSON null": (None, 400, "bad-request", "(top level)"),
    }


def test_every_malformed_registration_is_a_clear_4xx_that_writes_nothing(
    api: ApiStack, waiting: WorkerRecord
):
    for name, (body, status, code, named) in register_cases(waiting).items():
        if body is None:
            got = refused(api, "POST", REGISTER, raw=b"null")
        else:
            got = refused(api, "POST", REGISTER, body)
        assert got == (status, got[1]) and got[1]["code"] == code, (name, got)
        assert named in got[1]["message"], (name, got)


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        pytest.param(b"{not json", "application/json", id="not-json"),
        pytest.param(b'{"pool_id": "\xff\xfe"}', "application/json", id="not-utf8"),
        pytest.param(b"", "application/json", id="empty"),
        pytest.param(b"[" * 20_000 + b"]" * 20_000, "application/json", id="nested-20000-deep"),
        pytest.param(b'{"pool_id": 1e999999}', "application/json", id="huge-number"),
        pytest.param(b'{"pool_id": "p"}', "text/plain", id="not-declared-json"),
    ],
)
def test_bodies_that_are_not_the_json_asked_for_are_400(
    api: ApiStack, raw: bytes, content_type: str
):
    for path in (REGISTER, REREGISTER):
        status, problem = refused(
            api, "POST", path, raw=raw, headers={"Content-Type": content_type}
        )
        assert status == 400 and problem["code"] == "bad-request"


def test_oversized_bodies_are_413_whether_declared_or_streamed(api: ApiStack):
    big = b'{"pool_id": "' + b"x" * MAX_BODY_BYTES + b'"}'
    for path in (REGISTER, REREGISTER, f"/api/v1/pools/{POOLS['aws']}/errors"):
        status, problem = refused(api, "POST", path, raw=big)
        assert (status, problem["code"]) == (413, "too-large")
    before = api.all_stored_text()
    streamed = post_chunked(api, REGISTER, total_bytes=20 * MAX_BODY_BYTES)
    assert streamed[0] == 413 and is_problem(streamed[1])
    assert json.loads(streamed[1])["message"] == f"bodies are limited to {MAX_BODY_BYTES} bytes"
    assert api.all_stored_text() == before


def post_chunked(api: ApiStack, path: str, total_bytes: int) -> tuple[int, bytes]:
    """A body sent with Transfer-Encoding: chunked, so no Content-Length warns the server."""
    parts = urlsplit(api.base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    chunk = b" " * 8192

    def body() -> Iterator[bytes]:
        yield b'{"pool_id": "'
        for _ in range(total_bytes // len(chunk)):
            yield chunk

    try:
        connection.request(
            "POST",
            path,
            body=body(),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        return response.status, response.read()
    except (BrokenPipeError, ConnectionResetError):
        # The server may answer and close before the client has sent everything.
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


# -- every other endpoint -----------------------------------------------------------------------


def test_unknown_pools_and_bad_ids_on_every_endpoint_are_clear_4xx(
    api: ApiStack, running: tuple[WorkerRecord, str]
):
    worker, secret = running
    mine = {"Authorization": f"Bearer {secret}"}
    pool, group, wid = worker.pool_id, worker.worker_group, worker.worker_id
    nul, long_id = quote("a\x00b"), "w" * 201
    report = {"worker_id": wid, "title": "t"}
    reregister = {"pool_id": "no/such", "worker_group": group, "worker_id": wid, "secret": secret}
    workers, pools = "/api/v1/workers", "/api/v1/pools"
    cases: list[tuple[str, str, Any, dict[str, str], int, str]] = [
        # method, path, body, headers: status, code
        ("GET", f"{workers}/no/such/{group}/{wid}/should-terminate", None, mine, 403, "bad-secret"),
        ("GET", f"{workers}/{pool}/{nul}/{wid}/should-terminate", None, mine, 400, "bad-request"),
        ("GET", f"{workers}/{nul}/{group}/{wid}/should-terminate", None, mine, 400, "bad-request"),
        (
            "GET",
            f"{workers}/{pool}/{group}/{long_id}/should-terminate",
            None,
            mine,
            400,
            "bad-request",
        ),
        ("DELETE", f"{workers}/no/such/{group}/{wid}", None, mine, 403, "bad-secret"),
        ("DELETE", f"{workers}/no/such/{group}/{wid}", None, OPERATOR, 404, "unknown-worker"),
        ("DELETE", f"{workers}/{pool}/{group}/wnobody", None, OPERATOR, 404, "unknown-worker"),
        ("DELETE", f"{workers}/{pool}/{group}/{nul}", None, OPERATOR, 400, "bad-request"),
        ("POST", f"{pools}/no/such/errors", report, mine, 403, "bad-secret"),
        ("POST", f"{pools}/{nul}/errors", report, mine, 400, "bad-request"),
        ("POST", REREGISTER, reregister, {}, 403, "bad-secret"),
        ("GET", f"{pools}/no/such/workers", None, OPERATOR, 404, "unknown-pool"),
        ("GET", f"{pools}/no/such/errors", None, OPERATOR, 404, "unknown-pool"),
        ("GET", f"{pools}/{nul}/workers", None, OPERATOR, 400, "bad-request"),
        ("GET", pools, None, {"Authorization": "Bearer wrong"}, 401, "unauthorized"),
        ("PUT", REGISTER, {}, {}, 405, "method-not-allowed"),
        ("GET", REGISTER, None, {}, 405, "method-not-allowed"),
        ("GET", "/api/v2/anything", None, {}, 404, "not-found"),
        ("POST", "/", {}, {}, 404, "not-found"),
    ]
    for method, path, body, headers, status, code in cases:
        got = refused(api, method, path, body, headers=headers)
        assert got[0] == status and got[1]["code"] == code, (method, path, got)
    assert api.row(wid)["state"] == "running"  # the worker itself was never touched


@pytest.mark.parametrize(
    ("report", "named"),
    [
        ({"title": "disk \x00 full"}, "NUL"),
        ({"title": "t", "description": "a\x00b"}, "NUL"),
        ({"title": "t", "extra": {"a\x00": 1}}, "NUL"),
        ({"title": "t", "extra": {"list": ["fine", "bad\x00"]}}, "NUL"),
        ({"title": "t", "extra": {"load": float("nan")}}, "finite"),
        ({"title": "t", "extra": {"load": float("inf")}}, "finite"),
        ({"title": ""}, "title"),
        ({"title": "t" * 501}, "title"),
        ({"title": "t", "description": "d" * 10_001}, "description"),
        ({"title": "t", "extra": ["not", "an", "object"]}, "extra"),
        ({"title": "t", "worker_id": "w\x00"}, "worker_id"),
        ({}, "title"),
    ],
)
def test_a_malformed_error_report_is_400_and_stores_nothing(
    api: ApiStack, running: tuple[WorkerRecord, str], report: dict, named: str
):
    worker, secret = running
    body = {"worker_id": worker.worker_id, **report}
    # json.dumps writes NaN and Infinity, which Python's parser (and so FastAPI's) accepts.
    raw = json.dumps(body).encode()
    status, problem = refused(
        api,
        "POST",
        f"/api/v1/pools/{worker.pool_id}/errors",
        raw=raw,
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert (status, problem["code"]) == (400, "bad-request") and named in problem["message"]


def test_an_error_report_cannot_name_another_worker_as_its_sender(
    api: ApiStack, running: tuple[WorkerRecord, str]
):
    worker, secret = running
    reply = api.post(
        f"/api/v1/pools/{worker.pool_id}/errors",
        {"worker_id": worker.worker_id, "title": "spoof", "extra": {"worker_id": "wsomeoneelse"}},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert reply.status == 201
    listed = api.call("GET", f"/api/v1/pools/{worker.pool_id}/errors", headers=OPERATOR).json()
    (spoof,) = [e for e in listed if e["title"] == "spoof"]
    assert spoof["extra"]["worker_id"] == worker.worker_id


# -- the `wm` command ---------------------------------------------------------------------------


def run_wm(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "WM_CONFIG", "PORT")}
    return subprocess.run(
        [sys.executable, "-m", "wm", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        cwd=REPO,
        timeout=60,
    )


def clear_failure(done: subprocess.CompletedProcess[str], *named: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    for text in named:
        assert text in done.stderr, (text, done.stderr)


def test_wm_commands_refuse_unknown_pools_and_malformed_values(api: ApiStack):
    env = {"WM_CONFIG": str(api.stack.path), "DATABASE_URL": api.stack.db_url}
    before = api.all_stored_text()
    cases: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
        (("status", "--pool", "no/such"), ("no/such",)),
        (("workers", "list", "--pool", "no/such"), ("no/such",)),
        (("tasks", "list", "--pool", "no/such"), ("no/such",)),
        (("workers", "list", "--state", "lost"), ("--state", "lost")),
        (("tasks", "submit", POOLS["aws"], "--count", "0"), ("--count",)),
        (("tasks", "submit", POOLS["aws"], "--count", "-3"), ("--count",)),
        (("tasks", "submit", POOLS["aws"], "--count", "many"), ("--count",)),
        (("tasks", "submit", POOLS["aws"], "--count", "1", "--duration", "-1"), ("--duration",)),
        (("tasks", "submit", POOLS["aws"], "--count", "1", "--duration", "nan"), ("--duration",)),
        (("tasks", "submit", POOLS["aws"], "--count", "1", "--duration", "inf"), ("--duration",)),
        (("tasks", "submit", "a\x01b", "--count", "1"), ("no active pool", "a\\x01b")),
        (("run", "scanner", "--kind", "oracle"), ("--kind", "oracle")),
        (("run", "web", "--kind", "aws"), ("--kind",)),
        (("run", "nothing"), ("nothing",)),
        (("run", "provisioner", "--metrics-port", "70000"), ("--metrics-port",)),
    ]
    for args, named in cases:
        clear_failure(run_wm(*args, env=env), *named)
    assert api.all_stored_text() == before


def test_malformed_environment_and_config_files_are_named_errors(api: ApiStack, tmp_path: Path):
    good = {"WM_CONFIG": str(api.stack.path), "DATABASE_URL": api.stack.db_url}
    not_utf8 = tmp_path / "latin1.toml"
    not_utf8.write_bytes(api.stack.path.read_bytes() + b"\n# caf\xe9\n")
    missing_trust = tmp_path / "missing-trust.toml"
    missing_trust.write_text(
        api.stack.path.read_text().replace(
            str(api.sims["aws"].identity_trust_path), str(tmp_path / "gone.pem")
        )
    )
    before = api.all_stored_text()
    cases: list[tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]] = [
        ({"PORT": "http"}, ("config", "check"), ("PORT", "http")),
        ({"PORT": "99999"}, ("config", "check"), ("PORT", "99999")),
        ({"PORT": "0"}, ("config", "check"), ("PORT",)),
        ({"DATABASE_URL": "not a url"}, ("status",), ("DATABASE_URL",)),
        ({"DATABASE_URL": "mysql://x@localhost/wm"}, ("status",), ("DATABASE_URL",)),
        ({"WM_CONFIG": str(tmp_path)}, ("config", "check"), (str(tmp_path),)),
        ({"WM_CONFIG": str(not_utf8)}, ("config", "check"), ("UTF-8",)),
        (
            {"WM_CONFIG": str(missing_trust)},
            ("run", "web"),
            ("identity_certificate", "gone.pem"),
        ),
    ]
    for changes, args, named in cases:
        clear_failure(run_wm(*args, env={**good, **changes}), *named)
    assert api.all_stored_text() == before
