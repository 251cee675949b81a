"""Bad input everywhere else (issue 9, item 15): every API endpoint of the real web process and
every `wm` command, given malformed bodies, oversized payloads, unknown pools and providers,
control characters and malformed configuration. Each must be a clear error that names what is
wrong (a 4xx in Taskcluster's error body {code, message, requestInfo}; a message and exit code 2
for commands, no traceback) and
must write nothing: the whole database is compared before and after.

Already covered elsewhere, not repeated here: a broken config file's every problem listed by
`wm config check`, `wm pools sync` and `wm db upgrade` with nothing written, and unknown pools
for `wm tasks submit` and `wm pools errors` (tests/acceptance/test_cli.py); oversized and
non-JSON bodies with a stand-in verifier (tests/integration/api/test_worker_api.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.api_stack import (
    POOLS,
    PREFIX,
    ApiStack,
    module_api,
    send_chunked,
)
from tests.support.stack import REPO
from wm.api.app import MAX_BODY_BYTES
from wm.model import WorkerRecord

REGISTER = f"{PREFIX}/worker/register"
REREGISTER = f"{PREFIX}/worker/reregister"
# The codes Taskcluster answers a body that is not the JSON object asked for: not JSON at all,
# or JSON that fails the schema (an empty body, an array, a number out of range, text/plain).
NOT_THE_JSON_ASKED_FOR = {"MalformedPayload", "InputValidationError"}


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
def running(api: ApiStack) -> tuple[WorkerRecord, dict[str, str]]:
    """A registered worker and its Taskcluster credentials."""
    (worker,) = api.launch("gcp", 1)
    reply = api.register(worker, api.proof(worker))
    assert reply.status == 200
    return worker, reply.json()["credentials"]


def is_tc_error(body: bytes) -> bool:
    try:
        found = json.loads(body)
    except ValueError:
        return False
    return (
        isinstance(found, dict)
        and set(found) == {"code", "message", "requestInfo"}
        and all(isinstance(found[k], str) and found[k] for k in ("code", "message"))
    )


def refused(
    api: ApiStack, method: str, path: str, body: Any = None, *, signed: Any = None, **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    """Send (Hawk-signed with `signed` credentials, if given); the answer must be a 4xx in
    Taskcluster's error body and the database unchanged. (status, body)"""
    before = api.all_stored_text()
    if signed is not None:
        reply = api.signed(signed, method, path, body, **kwargs)
    else:
        reply = api.call(method, path, body, **kwargs)
    assert 400 <= reply.status < 500, (method, path, reply.status, reply.body)
    assert is_tc_error(reply.body), reply.body
    assert api.all_stored_text() == before, (method, path)
    return reply.status, reply.json()


# -- registration bodies ----------------------------------------------------------------------


def register_cases(worker: WorkerRecord) -> dict[str, tuple[Any, int, str, str]]:
    """name -> (body, status, code, what the message must name)."""
    good = {
        "workerPoolId": worker.pool_id,
        "providerId": worker.provider_id,
        "workerGroup": worker.worker_group,
        "workerId": worker.tc_worker_id,
        "workerIdentityProof": {"document": "{}", "signature": "c2ln"},
    }
    nul, newline = "w\x00x", "w\nx"
    invalid = "InputValidationError"
    return {
        "unknown pool": ({**good, "workerPoolId": "no/such"}, 404, "ResourceNotFound", "pool"),
        "unknown provider": ({**good, "providerId": "nope"}, 404, "ResourceNotFound", "Provider"),
        "another pool's provider": (
            {**good, "providerId": "gcp-sim"},
            400,
            "InputError",
            "provider",
        ),
        "unknown worker": ({**good, "workerId": "i-nobody"}, 404, "ResourceNotFound", "Worker"),
        "another pool's worker": (
            {**good, "workerPoolId": POOLS["gcp"]},
            404,
            "ResourceNotFound",
            "Worker",
        ),
        "unknown group": ({**good, "workerGroup": "mars-1"}, 404, "ResourceNotFound", "Worker"),
        "missing field": (
            {k: v for k, v in good.items() if k != "workerId"},
            400,
            invalid,
            "workerId: required",
        ),
        "unknown field": ({**good, "state": "running"}, 400, invalid, "state"),
        "id of the wrong type": ({**good, "workerPoolId": 5}, 400, invalid, "workerPoolId"),
        "id too long": ({**good, "workerId": "w" * 39}, 400, invalid, "workerId"),
        "empty id": ({**good, "workerGroup": ""}, 400, invalid, "workerGroup"),
        "NUL in the pool id": ({**good, "workerPoolId": nul}, 400, invalid, "workerPoolId"),
        "NUL in the worker id": ({**good, "workerId": nul}, 400, invalid, "workerId"),
        "newline in the group": ({**good, "workerGroup": newline}, 400, invalid, "workerGroup"),
        "NUL in the provider id": ({**good, "providerId": nul}, 400, invalid, "providerId"),
        "proof not an object": (
            {**good, "workerIdentityProof": "a string"},
            400,
            invalid,
            "workerIdentityProof",
        ),
        "a JSON array": ([good], 400, invalid, "body"),
        "a JSON number": (5, 400, invalid, "body"),
        "JSON null": (None, 400, invalid, "body"),
    }


def test_every_malformed_registration_is_a_clear_4xx_that_writes_nothing(
    api: ApiStack, waiting: WorkerRecord
):
    for name, (body, status, code, named) in register_cases(waiting).items():
        if body is None:
            got = refused(api, "POST", REGISTER, raw=b"null")
        else:
            got = refused(api, "POST", REGISTER, body)
        assert got[0] == status and got[1]["code"] == code, (name, got)
        assert named in got[1]["message"], (name, got)
        # A registration's body holds a proof: never echoed back.
        assert got[1]["requestInfo"]["payload"] == "(OMITTED)", name


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        pytest.param(b"{not json", "application/json", id="not-json"),
        pytest.param(b'{"workerPoolId": "\xff\xfe"}', "application/json", id="not-utf8"),
        pytest.param(b"", "application/json", id="empty"),
        pytest.param(b"[" * 20_000 + b"]" * 20_000, "application/json", id="nested-20000-deep"),
        pytest.param(b'{"workerPoolId": 1e999999}', "application/json", id="huge-number"),
        pytest.param(b'{"workerPoolId": "p"}', "text/plain", id="not-declared-json"),
    ],
)
def test_bodies_that_are_not_the_json_asked_for_are_400(
    api: ApiStack, raw: bytes, content_type: str
):
    for path in (REGISTER, REREGISTER):
        status, problem = refused(
            api, "POST", path, raw=raw, headers={"Content-Type": content_type}
        )
        assert status == 400 and problem["code"] in NOT_THE_JSON_ASKED_FOR, (path, problem)


def test_oversized_bodies_are_413_whether_declared_or_streamed(api: ApiStack):
    big = b'{"workerPoolId": "' + b"x" * MAX_BODY_BYTES + b'"}'
    for path in (REGISTER, REREGISTER, f"{PREFIX}/worker-pool-errors/{quote(POOLS['aws'], '')}"):
        status, problem = refused(api, "POST", path, raw=big)
        assert (status, problem["code"]) == (413, "InputTooLarge")
    before = api.all_stored_text()
    streamed = send_chunked(
        api.base_url, "POST", REGISTER, b'{"workerPoolId": "', 20 * MAX_BODY_BYTES
    )
    assert streamed[0] == 413 and is_tc_error(streamed[1])
    message = json.loads(streamed[1])["message"]
    assert message.startswith(f"bodies are limited to {MAX_BODY_BYTES} bytes")
    assert api.all_stored_text() == before


# -- every other endpoint -----------------------------------------------------------------------


def test_unknown_pools_and_bad_ids_on_every_endpoint_are_clear_4xx(
    api: ApiStack, running: tuple[WorkerRecord, dict[str, str]]
):
    worker, mine = running
    pool, group, wid = quote(worker.pool_id, ""), worker.worker_group, worker.tc_worker_id
    nul, long_id = quote("a\x00b"), "w" * 39
    report = {
        "workerGroup": group,
        "workerId": wid,
        "kind": "k",
        "title": "t",
        "description": "",
        "extra": {},
    }
    reregister = {"workerPoolId": "no/such", "workerGroup": group, "workerId": wid}
    reregister["secret"] = "s" * 44
    workers, errors = f"{PREFIX}/workers", f"{PREFIX}/worker-pool-errors"
    params, scopes, missing = "InvalidRequestArguments", "InsufficientScopes", "ResourceNotFound"
    operator = {"clientId": "static/wm-operator", "accessToken": api_operator_token()}
    cases: list[tuple[str, str, Any, Any, int, str]] = [
        # method, path, body, signed as: status, code
        ("GET", f"{workers}/no%2Fsuch/{group}/{wid}/should-terminate", None, mine, 403, scopes),
        ("GET", f"{workers}/{pool}/{nul}/{wid}/should-terminate", None, mine, 400, params),
        ("GET", f"{workers}/{nul}/{group}/{wid}/should-terminate", None, mine, 400, params),
        ("GET", f"{workers}/{pool}/{group}/{long_id}/should-terminate", None, mine, 400, params),
        ("DELETE", f"{workers}/no%2Fsuch/{group}/{wid}", None, mine, 403, scopes),
        ("DELETE", f"{workers}/no%2Fsuch/{group}/{wid}", None, operator, 404, missing),
        ("DELETE", f"{workers}/{pool}/{group}/i-nobody", None, operator, 404, missing),
        ("DELETE", f"{workers}/{pool}/{group}/{nul}", None, operator, 400, params),
        ("POST", f"{errors}/no%2Fsuch", report, mine, 403, scopes),
        # The operator holds worker-manager:* only: reporting as a worker needs assume: scopes.
        ("POST", f"{errors}/no%2Fsuch", report, operator, 403, scopes),
        ("POST", f"{errors}/{nul}", report, mine, 404, missing),
        ("POST", REREGISTER, reregister, None, 403, scopes),
        ("POST", REREGISTER, reregister, mine, 403, scopes),
        ("GET", f"{workers}/no%2Fsuch", None, operator, 404, missing),
        ("GET", f"{PREFIX}/worker-pool/no%2Fsuch", None, operator, 404, missing),
        ("GET", f"{workers}/{nul}", None, operator, 404, missing),
        ("GET", f"{PREFIX}/worker-pools", None, {**operator, "accessToken": "wrong"}, 401,
         "AuthenticationFailed"),
        ("PUT", REGISTER, {}, None, 405, "MethodNotAllowed"),
        ("GET", REGISTER, None, None, 405, "MethodNotAllowed"),
        ("GET", "/api/worker-manager/v2/anything", None, None, 404, missing),
        ("POST", "/", {}, None, 404, missing),
        ("GET", "/api/v1/pools", None, None, 404, missing),
    ]  # fmt: skip
    for method, path, body, signed, status, code in cases:
        got = refused(api, method, path, body, signed=signed)
        assert got[0] == status and got[1]["code"] == code, (method, path, got)
    assert api.row(worker.worker_id)["state"] == "running"  # the worker itself was never touched


def api_operator_token() -> str:
    from tests.support.api_stack import OPERATOR_TOKEN

    return OPERATOR_TOKEN


@pytest.mark.parametrize(
    ("report", "named"),
    [
        ({"title": "disk \x00 full"}, "NUL"),
        ({"description": "a\x00b"}, "NUL"),
        ({"extra": {"a\x00": 1}}, "NUL"),
        ({"extra": {"list": ["fine", "bad\x00"]}}, "NUL"),
        ({"extra": {"load": float("nan")}}, "finite"),
        ({"extra": {"load": float("inf")}}, "finite"),
        # Taskcluster's pattern is not anchored: a kind needs one lower-case letter or digit.
        ({"kind": "UPPER_CASE"}, "kind"),
        ({"title": "t" * 129}, "title"),
        ({"description": "d" * 10_241}, "description"),
        ({"extra": ["not", "an", "object"]}, "extra"),
        ({"workerId": "w\x00"}, "workerId"),
        ({"title": None}, "title"),
    ],
)
def test_a_malformed_error_report_is_400_and_stores_nothing(
    api: ApiStack, running: tuple[WorkerRecord, dict[str, str]], report: dict, named: str
):
    worker, mine = running
    body = {
        "workerGroup": worker.worker_group,
        "workerId": worker.tc_worker_id,
        "kind": "worker-error",
        "title": "t",
        "description": "",
        "extra": {},
        **report,
    }
    # json.dumps writes NaN and Infinity, which Python's parser (and so FastAPI's) accepts.
    raw = json.dumps(body).encode()
    path = f"{PREFIX}/worker-pool-errors/{quote(worker.pool_id, '')}"
    status, problem = refused(api, "POST", path, raw=raw, signed=mine)
    assert (status, problem["code"]) == (400, "InputValidationError")
    assert named in problem["message"]


def test_an_error_report_cannot_name_another_worker_as_its_sender(
    api: ApiStack, running: tuple[WorkerRecord, dict[str, str]]
):
    worker, mine = running
    spoofed = {"workerGroup": "elsewhere", "workerId": "i-someoneelse"}
    stored = api.client(mine).reportWorkerError(
        worker.pool_id,
        {
            "workerGroup": worker.worker_group,
            "workerId": worker.tc_worker_id,
            "kind": "worker-error",
            "title": "spoof",
            "description": "",
            "extra": spoofed,
        },
    )
    assert stored["extra"] == {"workerGroup": worker.worker_group, "workerId": worker.tc_worker_id}
    listed = api.operator().listWorkerPoolErrors(worker.pool_id)["workerPoolErrors"]
    (spoof,) = [e for e in listed if e["title"] == "spoof"]
    assert spoof["extra"]["workerId"] == worker.tc_worker_id


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
        (("run", "scanner", "--supervised-by", "1"), ("--supervised-by",)),
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
