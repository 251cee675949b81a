"""Request bodies are read as Taskcluster reads them: every body the API takes is checked against
its endpoint's schema before pydantic sees it, so nothing is coerced ("yes" is no boolean, 5 no
string, a number no date-time) and every refusal names its key path.

Pure: the request models, validated as FastAPI validates a body, judged against the published
schemas (tests/fixtures/tc_schemas) with ajv's formats.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tests.support.tc_schemas import taskcluster_errors
from wm.api.endpoint_table import ENDPOINTS as TABLE
from wm.api.models import (
    SCHEMA_ERROR,
    RegisterWorkerRequest,
    ReportWorkerErrorRequest,
    ReregisterWorkerRequest,
    UpdateWorkerPoolRequest,
    WorkerPoolDefinitionRequest,
    WorkerRequest,
    js_date,
)

SECRET = "s" * 44
DEFINITION = {
    "providerId": "aws-main",
    "description": "Linux builders",
    "config": {},  # checked against its provider's schema later (tests/unit/test_pool_definition)
    "owner": "ci@example.com",
    "emailOnError": False,
}
HAND_MADE = {
    "expires": "2026-12-31T00:00:00.000Z",
    "capacity": 2,
    "providerInfo": {"staticSecret": SECRET},
}
# endpoint -> (its request model, its schema's name, a body the schema accepts)
ENDPOINTS: dict[str, tuple[type[BaseModel], str, dict[str, Any]]] = {
    "registerWorker": (
        RegisterWorkerRequest,
        "register-worker-request",
        {
            "workerPoolId": "proj-ci/linux",
            "providerId": "aws-main",
            "workerGroup": "us-east-1",
            "workerId": "i-0123456789abcdef0",
            "workerIdentityProof": {"document": "{}", "signature": "c2ln"},
            "systemBootTime": "2026-12-04T10:00:00.000Z",
        },
    ),
    "reregisterWorker": (
        ReregisterWorkerRequest,
        "reregister-worker-request",
        {
            "workerPoolId": "proj-ci/linux",
            "workerGroup": "us-east-1",
            "workerId": "i-0123456789abcdef0",
            "secret": SECRET,
        },
    ),
    "reportWorkerError": (
        ReportWorkerErrorRequest,
        "report-worker-error-request",
        {
            "workerGroup": "us-east-1",
            "workerId": "i-0123456789abcdef0",
            "kind": "worker-error",
            "title": "disk full",
            "description": "no space left on /",
            "extra": {"code": "ENOSPC"},
        },
    ),
    "createWorkerPool": (WorkerPoolDefinitionRequest, "create-worker-pool-request", DEFINITION),
    # updateWorker takes the same schema
    "createWorker": (WorkerRequest, "create-worker-request", HAND_MADE),
    "updateWorker": (WorkerRequest, "create-worker-request", HAND_MADE),
    "updateWorkerPool": (
        UpdateWorkerPoolRequest,
        "update-worker-pool-request",
        {
            **DEFINITION,
            "workerPoolId": "proj-ci/linux",
            "created": "2026-12-01T08:00:00.000Z",
            "lastModified": "2026-12-02T08:00:00.000Z",
        },
    ),
}


def problems(endpoint: str, body: Any) -> list[str]:
    """wm's problems with `body` as `endpoint`'s request, each `key.path: what`; [] if read."""
    model = ENDPOINTS[endpoint][0]
    try:
        model.model_validate(body)
    except ValidationError as refused:
        found = []
        for error in refused.errors():
            if error["type"] == SCHEMA_ERROR:
                found += error["ctx"]["problems"]
            else:
                found.append(f"{'.'.join(map(str, error['loc']))}: {error['msg']}")
        return found
    return []


def taskcluster_refuses(endpoint: str, body: Any) -> bool:
    return bool(taskcluster_errors(ENDPOINTS[endpoint][1], body))


def good(endpoint: str) -> dict[str, Any]:
    return copy.deepcopy(ENDPOINTS[endpoint][2])


# endpoint -> its body's schema, as the endpoint table holds it
REQUEST_SCHEMAS = {row.name: row.body for row in TABLE if row.body is not None}


def test_every_route_with_a_body_has_its_schema_and_model():
    assert set(REQUEST_SCHEMAS) == set(ENDPOINTS)
    for endpoint, (model, _, _) in ENDPOINTS.items():
        assert model.SCHEMA is REQUEST_SCHEMAS[endpoint], endpoint  # type: ignore[attr-defined]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_the_good_bodies_are_read_and_taskcluster_accepts_them(endpoint):
    body = good(endpoint)
    assert problems(endpoint, body) == []
    assert not taskcluster_refuses(endpoint, body)
    required_only = {k: body[k] for k in REQUEST_SCHEMAS[endpoint]["required"]}
    assert problems(endpoint, required_only) == []
    assert not taskcluster_refuses(endpoint, required_only)


# -- the type table: every field of every body, given each JSON type it is not -----------------

WRONG_TYPES: dict[str, tuple[str, list[Any]]] = {
    # a field's type -> (what the problem says, values of other JSON types)
    "string": ("must be a string", [5, 5.0, 0.5, True, None, {"a": "b"}, ["a"]]),
    "boolean": ("must be a boolean", ["yes", "true", "1", 1, 0, 1.0, None, {}, []]),
    "object": ("must be an object", ["{}", "", 5, True, None, []]),
    "integer": ("must be an integer", ["2", 2.5, True, None, {}, []]),
}


def _type_of(value: Any) -> str:
    return {str: "string", bool: "boolean", dict: "object", int: "integer"}[type(value)]


def _type_cases() -> list[Any]:
    cases = []
    for endpoint, (_, _, body) in ENDPOINTS.items():
        for key, value in body.items():
            if key in ("workerIdentityProof", "providerInfo"):
                continue  # no type of its own: one of its forms (the form table below)
            message, values = WRONG_TYPES[_type_of(value)]
            for wrong in values:
                cases.append(
                    pytest.param(
                        endpoint, key, wrong, f"{key}: {message}", id=f"{endpoint}-{key}-{wrong!r}"
                    )
                )
    return cases


@pytest.mark.parametrize(("endpoint", "key", "wrong", "problem"), _type_cases())
def test_a_field_of_another_type_is_refused_not_coerced(endpoint, key, wrong, problem):
    body = {**good(endpoint), key: wrong}

    assert problems(endpoint, body) == [problem]
    assert taskcluster_refuses(endpoint, body)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_missing_required_field_and_an_extra_one_are_each_named(endpoint):
    body = good(endpoint)
    schema = REQUEST_SCHEMAS[endpoint]
    for key in schema["required"]:
        missing = {k: v for k, v in body.items() if k != key}
        assert problems(endpoint, missing) == [f"{key}: required"], key
        assert taskcluster_refuses(endpoint, missing), key
    extra = {**body, "nonce": "x"}
    (problem,) = problems(endpoint, extra)
    assert problem.startswith("nonce: unknown key (allowed: ")
    assert taskcluster_refuses(endpoint, extra)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("body", [[], "body", 5, None, True], ids=repr)
def test_a_body_that_is_no_object_is_refused(endpoint, body):
    assert problems(endpoint, body) == ["body: must be an object"]
    assert taskcluster_refuses(endpoint, body)


# -- patterns, lengths, formats and the proof's forms ------------------------------------------

POOL_ID = "must be a worker pool id <provisionerId>/<workerType>"
NAME = "must be 1 to 38 letters, digits, '-' or '_'"
PROOF = "workerIdentityProof: must be one provider type's proof"
REFUSALS = [
    # endpoint, scenario, changes, the problem (its start)
    (
        "registerWorker",
        "a pool id without a slash",
        {"workerPoolId": "proj"},
        f"workerPoolId: {POOL_ID}",
    ),
    (
        "registerWorker",
        "a worker type in capitals",
        {"workerPoolId": "proj/Linux"},
        "workerPoolId: ",
    ),
    (
        "registerWorker",
        "an empty provider id",
        {"providerId": ""},
        "providerId: must be at least 1",
    ),
    (
        "registerWorker",
        "a worker id of 39 characters",
        {"workerId": "w" * 39},
        "workerId: must be at most 38",
    ),
    ("registerWorker", "a dot in the group", {"workerGroup": "us.east"}, f"workerGroup: {NAME}"),
    ("registerWorker", "a newline ending the id", {"workerId": "w\n"}, f"workerId: {NAME}"),
    (
        "registerWorker",
        "a boot time that is a number",
        {"systemBootTime": 1764842400},
        "systemBootTime: must be a string",
    ),
    (
        "registerWorker",
        "a boot time that is a date",
        {"systemBootTime": "2026-12-04"},
        "systemBootTime: must be a date-time",
    ),
    (
        "registerWorker",
        "a boot time on the 31st of November",
        {"systemBootTime": "2026-11-31T10:00:00Z"},
        "systemBootTime: must be a date-time",
    ),
    ("registerWorker", "a proof that is text", {"workerIdentityProof": "proof"}, PROOF),
    (
        "registerWorker",
        "a proof of no provider's form",
        {"workerIdentityProof": {"valid": True}},
        PROOF,
    ),
    ("registerWorker", "an empty proof", {"workerIdentityProof": {}}, PROOF),
    (
        "registerWorker",
        "an attested document with a nonce beside it",
        {"workerIdentityProof": {"document": "d", "nonce": "n"}},
        "workerIdentityProof.nonce: unknown key (allowed: document)",
    ),
    (
        "registerWorker",
        "an identity document with a number for its signature",
        {"workerIdentityProof": {"document": "d", "signature": 5}},
        "workerIdentityProof.signature: must be a string",
    ),
    (
        "registerWorker",
        "a token and a document",
        {"workerIdentityProof": {"token": "t", "document": "d"}},
        "workerIdentityProof.document: unknown key (allowed: token)",
    ),
    (
        "registerWorker",
        "a token that is an object",
        {"workerIdentityProof": {"token": {}}},
        "workerIdentityProof.token: must be a string",
    ),
    (
        "registerWorker",
        "a static secret too short",
        {"workerIdentityProof": {"staticSecret": "s"}},
        "workerIdentityProof.staticSecret: must be 44",
    ),
    ("reregisterWorker", "a secret of 43 characters", {"secret": "s" * 43}, "secret: must be 44"),
    ("reregisterWorker", "a secret with a dot", {"secret": "s" * 43 + "."}, "secret: must be 44"),
    (
        "reregisterWorker",
        "a pool id of two slashes",
        {"workerPoolId": "a/b/c"},
        f"workerPoolId: {POOL_ID}",
    ),
    (
        "reportWorkerError",
        "a kind with no lower-case letter, digit or '-'",
        {"kind": "UPPER_CASE"},
        "kind: must hold",
    ),
    (
        "reportWorkerError",
        "a kind of 129 characters",
        {"kind": "k" * 129},
        "kind: must be at most 128",
    ),
    (
        "reportWorkerError",
        "a title of 129 characters",
        {"title": "t" * 129},
        "title: must be at most 128",
    ),
    (
        "reportWorkerError",
        "a description of 10241 characters",
        {"description": "d" * 10241},
        "description: must be at most 10240",
    ),
    ("reportWorkerError", "an empty worker id", {"workerId": ""}, "workerId: must be at least 1"),
    (
        "createWorkerPool",
        "an owner who is no email address",
        {"owner": "ci team"},
        "owner: must be an email address",
    ),
    (
        "createWorkerPool",
        "a provider id with a space",
        {"providerId": "aws main"},
        f"providerId: {NAME}",
    ),
    (
        "createWorkerPool",
        "a description of 10241 characters",
        {"description": "d" * 10241},
        "description: must be at most 10240",
    ),
    (
        "updateWorkerPool",
        "a creation time that is a number",
        {"created": 0},
        "created: must be a string",
    ),
    (
        "updateWorkerPool",
        "a modification time that is no date-time",
        {"lastModified": "yesterday"},
        "lastModified: must be a date-time",
    ),
    (
        "updateWorkerPool",
        "a pool id in capitals",
        {"workerPoolId": "proj-ci/Linux"},
        f"workerPoolId: {POOL_ID}",
    ),
]


@pytest.mark.parametrize(
    ("endpoint", "scenario", "changes", "problem"), REFUSALS, ids=[r[1] for r in REFUSALS]
)
def test_what_the_schema_refuses_is_refused_naming_its_key_path(
    endpoint, scenario, changes, problem
):
    body = {**good(endpoint), **changes}

    found = problems(endpoint, body)

    assert len(found) == 1 and found[0].startswith(problem), found
    if not scenario.startswith("a newline"):  # Python's `$` takes a final newline: see the oracle
        assert taskcluster_refuses(endpoint, body), scenario


ACCEPTED = [
    # endpoint, scenario, changes
    ("registerWorker", "a GCE identity token", {"workerIdentityProof": {"token": "a.b.c"}}),
    ("registerWorker", "an Azure attested document", {"workerIdentityProof": {"document": "MIIB"}}),
    ("registerWorker", "a static secret", {"workerIdentityProof": {"staticSecret": SECRET}}),
    ("registerWorker", "a boot time without a zone", {"systemBootTime": "2026-12-04T10:00:00"}),
    (
        "registerWorker",
        "a boot time with a space and an offset",
        {"systemBootTime": "2026-12-04 10:00:00+0100"},
    ),
    ("registerWorker", "a leap second", {"systemBootTime": "2016-12-31T23:59:60Z"}),
    ("registerWorker", "ids of 38 characters", {"workerId": "w" * 38, "providerId": "P_" * 19}),
    ("reportWorkerError", "a kind holding one lower-case letter", {"kind": "Disk full"}),
    (
        "reportWorkerError",
        "an empty title, description and extra",
        {"title": "", "description": "", "extra": {}},
    ),
    (
        "reportWorkerError",
        "extra holding anything",
        {"extra": {"n": 5.5, "ok": None, "list": [1, "a"]}},
    ),
    ("createWorkerPool", "the null provider", {"providerId": "null-provider"}),
    ("createWorkerPool", "an empty description", {"description": ""}),
    (
        "updateWorkerPool",
        "ajv's date-times",
        {"created": "2026-12-01t08:00:00z", "lastModified": "2026-12-01T08:00:00.5+01:00"},
    ),
]


@pytest.mark.parametrize(
    ("endpoint", "scenario", "changes"), ACCEPTED, ids=[a[1] for a in ACCEPTED]
)
def test_what_the_schema_accepts_is_read(endpoint, scenario, changes):
    body = {**good(endpoint), **changes}

    assert problems(endpoint, body) == [], scenario
    assert not taskcluster_refuses(endpoint, body), scenario


def test_a_body_is_read_as_given():
    body = good("registerWorker")
    read = RegisterWorkerRequest.model_validate(body)
    assert read.model_dump() == body
    update = UpdateWorkerPoolRequest.model_validate(good("updateWorkerPool"))
    assert update.emailOnError is False and update.created == "2026-12-01T08:00:00.000Z"


def test_values_postgres_cannot_store_are_refused_after_the_schema():
    report = {**good("reportWorkerError"), "description": "a\x00b"}
    assert not taskcluster_refuses("reportWorkerError", report)
    (problem,) = problems("reportWorkerError", report)
    assert problem.startswith("description: ") and "NUL" in problem
    nan = {**good("createWorkerPool"), "config": {"x": float("nan")}}
    (problem,) = problems("createWorkerPool", nan)
    assert problem.startswith("config: ") and "finite" in problem


# -- Taskcluster's verdict on every mutation of every body --------------------------------------

MUTANTS: dict[str, Any] = {
    "null": None,
    "yes": "yes",
    "true-text": "true",
    "digits": "5",
    "empty": "",
    "long": "x" * 39,
    "integer": 5,
    "integral-float": 5.0,
    "fraction": 5.5,
    "true": True,
    "object": {},
    "list": [],
    "date-time": "2026-12-04T10:00:00Z",
    "pool-id": "a/b",
    "secret": SECRET,
}


def _paths(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path] if path else []
    if isinstance(value, dict) and (
        not path or path[-1] in ("workerIdentityProof", "providerInfo")
    ):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    return found


def _mutated(body: dict[str, Any], path: tuple[str, ...], how: str) -> dict[str, Any]:
    result = copy.deepcopy(body)
    target = result
    for part in path[:-1]:
        target = target[part]
    if how == "drop":
        del target[path[-1]]
    elif how == "extra key":
        target["zzUnknown"] = 1
    else:
        target[path[-1]] = MUTANTS[how]
    return result


def test_every_mutation_of_every_body_gets_taskclusters_verdict():
    disagreements, compared = [], 0
    for endpoint, (_, _, body) in ENDPOINTS.items():
        for path in _paths(body):
            for how in ("drop", "extra key", *MUTANTS):
                mutant = _mutated(body, path, how)
                compared += 1
                wm_refuses = bool(problems(endpoint, mutant))
                if wm_refuses != taskcluster_refuses(endpoint, mutant):
                    verdict = "refuses" if wm_refuses else "accepts"
                    disagreements.append(f"{endpoint} {'/'.join(path)} {how}: wm {verdict}")
    assert disagreements == []
    assert compared > 500


# -- the boot time a registration reports -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-12-04T10:00:00.000Z", datetime(2026, 12, 4, 10, tzinfo=UTC)),
        ("2026-12-04t10:00:00z", datetime(2026, 12, 4, 10, tzinfo=UTC)),
        ("2026-12-04 10:00:00", datetime(2026, 12, 4, 10, tzinfo=UTC)),  # no zone: UTC
        ("2026-12-04T11:00:00+01:00", datetime(2026, 12, 4, 10, tzinfo=UTC)),
        ("2026-12-04T11:00:00+0100", datetime(2026, 12, 4, 10, tzinfo=UTC)),
        ("2026-12-04T09:00:00-01", datetime(2026, 12, 4, 10, tzinfo=UTC)),
        ("2026-12-04T10:00:00.123456789Z", datetime(2026, 12, 4, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2016-12-31T23:59:60Z", None),  # a date-time to ajv, an invalid Date to JavaScript
        ("2026-12-04T10:00:00+24:00", None),
    ],
)
def test_a_boot_time_is_the_instant_javascript_reads(text, instant):
    found = js_date(text)

    assert found == instant
    assert found is None or found.utcoffset() is not None  # an instant, never a naive time


def test_a_registration_without_a_boot_time_reports_none():
    body = {k: v for k, v in good("registerWorker").items() if k != "systemBootTime"}
    assert RegisterWorkerRequest.model_validate(body).boot_time() is None
