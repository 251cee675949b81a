"""Every request body, on every route that takes one, is checked as strictly as Taskcluster's
schema for it, through the real `taskcluster` client against `wm run web`: a body the schema
refuses (a field of another JSON type, "yes" for a boolean, digits or a fraction for an integer,
a missing required field, a property the schema does not declare) is 400
`InputValidationError` naming the field, and nothing is written; the valid bodies are still
taken. The refusals of each route are made with bodies otherwise valid, to a pool or worker they
would change if taken (a lax reading stored `emailOnError: "yes"` as true).

What each route requires and declares is read from Taskcluster's published schemas
(tests/fixtures/tc_schemas), not from wm. The unit tests (tests/unit/test_api_request_bodies.py)
hold the finer table: patterns, lengths, formats, each proof form, every mutation judged by the
schemas themselves.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import taskcluster

from tests.support.api_stack import (
    OPERATOR_CLIENT,
    OPERATOR_TOKEN,
    PREFIX,
    ApiStack,
    module_api,
)
from tests.support.definitions import aws_create_body
from tests.support.tc_schemas import SCHEMAS, check
from wm.model import WorkerRecord
from wm.tc.errors import js_time

OPERATOR = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
CREATED, UPDATED = "bodies/created", "bodies/updated"
SCHEMA_NAMES = {
    "registerWorker": "register-worker-request",
    "reregisterWorker": "reregister-worker-request",
    "reportWorkerError": "report-worker-error-request",
    "createWorkerPool": "create-worker-pool-request",
    "updateWorkerPool": "update-worker-pool-request",
}


class _Drop:
    def __repr__(self) -> str:
        return "<dropped>"


DROP = _Drop()  # an edit that removes the key

# A field's JSON type -> values of other JSON types (what a lax reading might coerce).
WRONG_VALUES: dict[str, list[Any]] = {
    "string": [5, 5.5, True, None, {"a": "b"}, ["a"]],
    "boolean": ["yes", "true", "1", 1, 0, None, {}],
    "object": ["{}", 5, True, None, []],
    "integer": ["5", 5.5, True, None, {}],
    "number": ["0.5", True, None, []],
}
# The typed fields of each route's body, by key path (dotted), with their JSON types. The
# definitions' config fields are the provider schema's, checked once the provider is known.
TYPED_FIELDS: dict[str, dict[str, str]] = {
    "registerWorker": {
        "workerPoolId": "string",
        "providerId": "string",
        "workerGroup": "string",
        "workerId": "string",
        "systemBootTime": "string",
        "workerIdentityProof.document": "string",
        "workerIdentityProof.signature": "string",
    },
    "reregisterWorker": {
        "workerPoolId": "string",
        "workerGroup": "string",
        "workerId": "string",
        "secret": "string",
    },
    "reportWorkerError": {
        "workerGroup": "string",
        "workerId": "string",
        "kind": "string",
        "title": "string",
        "description": "string",
        "extra": "object",
    },
    "createWorkerPool": {
        "providerId": "string",
        "description": "string",
        "config": "object",
        "owner": "string",
        "emailOnError": "boolean",
        "config.minCapacity": "integer",
        "config.maxCapacity": "integer",
        "config.scalingRatio": "number",
        "config.lifecycle.registrationTimeout": "integer",
        "config.launchConfigs[0].workerManager.capacityPerInstance": "integer",
    },
}
TYPED_FIELDS["updateWorkerPool"] = {
    **TYPED_FIELDS["createWorkerPool"],
    "workerPoolId": "string",
    "created": "string",
    "lastModified": "string",
}


def _schema(route: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{SCHEMA_NAMES[route]}.json").read_text())


@dataclass(frozen=True)
class Refusal:
    route: str
    path: str  # the key path edited, which the message must name
    value: Any  # the value written there, or DROP

    @property
    def id(self) -> str:
        return f"{self.route}-{self.path}={self.value!r}"


def _refusals() -> list[Refusal]:
    found = []
    for route, fields in TYPED_FIELDS.items():
        for path, kind in fields.items():
            found += [Refusal(route, path, wrong) for wrong in WRONG_VALUES[kind]]
        schema = _schema(route)
        found += [Refusal(route, key, DROP) for key in schema["required"]]
        found.append(Refusal(route, "nonce", "an undeclared property"))
    found += [
        Refusal("registerWorker", "workerIdentityProof", "a proof as text"),
        Refusal("registerWorker", "workerIdentityProof", None),
        Refusal("registerWorker", "workerIdentityProof", {"valid": True}),  # no provider's form
        Refusal("registerWorker", "workerIdentityProof.nonce", "beside the proof"),
        Refusal("createWorkerPool", "config.maxCapacity", -1),
        Refusal("createWorkerPool", "config.unknownSetting", 1),
        Refusal("updateWorkerPool", "lastModified", "yesterday"),
    ]
    return found


REFUSALS = _refusals()


def test_the_table_covers_every_route_field_and_required_key():
    for route, fields in TYPED_FIELDS.items():
        schema = _schema(route)
        assert set(schema["properties"]) - {"workerIdentityProof"} <= set(fields), route
        dropped = {r.path for r in REFUSALS if r.route == route and r.value is DROP}
        assert set(schema["required"]) <= dropped, route
    assert len(REFUSALS) > 150


# -- the stack ----------------------------------------------------------------------------------


@dataclass
class Scene:
    api: ApiStack
    waiting: WorkerRecord  # requested, not yet registered: registerWorker's target
    proof: dict[str, Any]  # its genuine proof
    running: WorkerRecord  # registered: reregisterWorker's and reportWorkerError's sender
    credentials: dict[str, str]
    secret: str


@pytest.fixture(scope="module")
def scene(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[Scene]:
    tmp = tmp_path_factory.mktemp("request-bodies")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as api:
        api.client(OPERATOR).createWorkerPool(UPDATED, definition(api, UPDATED))
        (waiting,) = api.launch("aws", 1)
        (running,) = api.launch("gcp", 1)
        reply = api.register(running, api.proof(running))
        assert reply.status == 200, reply.body
        answer = reply.json()
        yield Scene(
            api, waiting, api.proof(waiting), running, answer["credentials"], answer["secret"]
        )


def definition(api: ApiStack, pool_id: str) -> dict[str, Any]:
    """A valid definition on the AWS provider, with every typed config field set."""
    body = aws_create_body(api.stack.config(), pool_id)
    body["emailOnError"] = False
    body["config"].update(minCapacity=0, scalingRatio=1)
    body["config"]["lifecycle"] = {"registrationTimeout": 1800}
    body["config"]["launchConfigs"][0]["workerManager"]["capacityPerInstance"] = 1
    return body


def good_body(scene: Scene, route: str) -> dict[str, Any]:
    """A body the route takes, aimed where taking it would change something."""
    api = scene.api
    if route == "registerWorker":
        booted = scene.waiting.created + timedelta(seconds=30)
        return {**api.register_body(scene.waiting, scene.proof), "systemBootTime": js_time(booted)}
    worker = scene.running
    ids = {"workerGroup": worker.worker_group, "workerId": worker.tc_worker_id}
    if route == "reregisterWorker":
        return {"workerPoolId": worker.pool_id, **ids, "secret": scene.secret}
    if route == "reportWorkerError":
        return {**ids, "kind": "worker-error", "title": "t", "description": "d", "extra": {}}
    if route == "createWorkerPool":
        return definition(api, CREATED)
    answer = api.client(OPERATOR).workerPool(UPDATED)  # its own answer, edited and sent back
    body = {k: v for k, v in answer.items() if k in _schema(route)["properties"]}
    return {**body, "description": "changed"}


def send(scene: Scene, route: str, body: Any) -> Any:
    """The call as the real client makes it, with the credentials the route is made with."""
    api = scene.api
    if route == "registerWorker":
        return api.client().registerWorker(body)
    if route == "reregisterWorker":
        return api.client(scene.credentials).reregisterWorker(body)
    if route == "reportWorkerError":
        return api.client(scene.credentials).reportWorkerError(scene.running.pool_id, body)
    pool_id = CREATED if route == "createWorkerPool" else UPDATED
    return getattr(api.client(OPERATOR), route)(pool_id, body)


def edited(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`body` with the value at dotted `path` (`a.b[0].c`) replaced, set or dropped."""
    result = copy.deepcopy(body)
    parts = path.replace("[", ".[").split(".")
    target: Any = result
    for part in parts[:-1]:
        target = target[int(part[1:-1])] if part.startswith("[") else target.setdefault(part, {})
    if value is DROP:
        target.pop(parts[-1], None)
    else:
        target[parts[-1]] = value
    return result


def refusal(call: Callable[[], Any]) -> tuple[int, str, str]:
    with pytest.raises(taskcluster.TaskclusterRestFailure) as caught:
        call()
    error = caught.value
    return error.status_code, error.body["code"], error.body["message"].split("\n\n---\n")[0]


# -- refused ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", REFUSALS, ids=[r.id for r in REFUSALS])
def test_a_body_the_schema_refuses_is_400_naming_the_field_and_writes_nothing(
    scene: Scene, case: Refusal
):
    body = edited(good_body(scene, case.route), case.path, case.value)
    before = scene.api.all_stored_text()

    status, code, message = refusal(lambda: send(scene, case.route, body))

    assert (status, code) == (400, "InputValidationError"), message
    assert f"{case.path}: " in message, message
    assert scene.api.all_stored_text() == before


def test_a_refused_body_left_the_pools_and_workers_as_they_were(scene: Scene):
    api, operator = scene.api, scene.api.client(OPERATOR)
    assert refusal(lambda: operator.workerPool(CREATED))[:2] == (404, "ResourceNotFound")
    kept = operator.workerPool(UPDATED)
    assert (kept["emailOnError"], kept["description"]) == (
        False,
        definition(api, UPDATED)["description"],
    )
    assert api.row(scene.waiting.worker_id)["state"] == "requested"
    assert api.row(scene.running.worker_id)["state"] == "running"


def test_a_body_that_is_no_json_object_is_refused(scene: Scene):
    for route, method, path in (
        ("createWorkerPool", "PUT", f"/worker-pool/{CREATED.replace('/', '%2F')}"),
        ("registerWorker", "POST", "/worker/register"),
    ):
        for raw in (b"null", b'"a definition"', b"[]"):
            reply = scene.api.operator_call(method, PREFIX + path, raw=raw)
            status, code, message = reply.refusal()
            assert (status, code) == (400, "InputValidationError"), (route, raw, message)
            assert "body: must be an object" in message, (route, raw)


# -- taken --------------------------------------------------------------------------------------


def test_a_valid_definition_is_still_created_and_updated(scene: Scene):
    body = good_body(scene, "createWorkerPool")

    created = check("worker-pool-full", send(scene, "createWorkerPool", body))

    assert created["emailOnError"] is False and created["config"] == body["config"]
    update = good_body(scene, "updateWorkerPool")
    update["emailOnError"] = True
    update["config"]["maxCapacity"] = 5.0  # an integer to JSON schema (draft 6 on) and to ajv
    updated = check("worker-pool-full", send(scene, "updateWorkerPool", update))
    assert (updated["emailOnError"], updated["description"]) == (True, "changed")
    assert updated["config"]["maxCapacity"] == 5
    assert scene.api.client(OPERATOR).workerPool(UPDATED)["emailOnError"] is True


def test_a_valid_error_report_and_reregistration_are_still_taken(scene: Scene):
    report = send(scene, "reportWorkerError", good_body(scene, "reportWorkerError"))
    rotated = send(scene, "reregisterWorker", good_body(scene, "reregisterWorker"))

    assert check("worker-pool-error", report)["kind"] == "worker-error"
    assert check("reregister-worker-response", rotated)["secret"] != scene.secret


def test_a_valid_registration_is_still_taken_with_its_boot_time(scene: Scene):
    answer = send(scene, "registerWorker", good_body(scene, "registerWorker"))

    check("register-worker-response", answer)
    row = scene.api.row(scene.waiting.worker_id)
    assert row["state"] == "running"
    # The boot time said, kept within what wm knows (after the create, not after registering).
    assert scene.waiting.created <= row["booted_at"] <= row["registered_at"]
