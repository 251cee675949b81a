"""Taskcluster's error replies: status per code, the body's shape and the message text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wm.tc.errors import (
    ErrorBody,
    TaskclusterError,
    authentication_failed,
    error_body,
    insufficient_scopes,
    js_time,
)

NOW = datetime(2019, 10, 18, 21, 16, 41, 593_999, tzinfo=UTC)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("MalformedPayload", 400),
        ("InvalidRequestArguments", 400),
        ("InputValidationError", 400),
        ("InputError", 400),
        ("AuthenticationFailed", 401),
        ("InsufficientScopes", 403),
        ("ResourceNotFound", 404),
        ("RequestConflict", 409),
        ("ResourceExpired", 410),
        ("InputTooLarge", 413),
        ("InternalServerError", 500),
        ("ProviderSetupFailed", 503),
    ],
)
def test_each_code_has_taskclusters_status(code, status):
    assert TaskclusterError(code, "m").status == status


def test_an_unknown_code_is_a_programming_error():
    with pytest.raises(ValueError, match="NotACode"):
        TaskclusterError("NotACode", "m")


def test_only_authentication_failures_ask_for_hawk():
    assert authentication_failed("Bad mac").headers == {"www-authenticate": "hawk"}
    assert TaskclusterError("InsufficientScopes", "m").headers == {}


def test_the_error_can_be_raised_and_caught():
    with pytest.raises(TaskclusterError) as caught:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise TaskclusterError("ResourceNotFound", "Worker not found") from inner
    assert caught.value.status == 404


def test_js_time_is_milliseconds_and_z():
    assert js_time(NOW) == "2019-10-18T21:16:41.593Z"


def test_body_fills_details_and_appends_the_trailer():
    error = TaskclusterError(
        "InputError", "Invalid provider {{providerId}}; keep {{absent}}", {"providerId": "aws"}
    )
    body = error_body(
        error,
        method="createWorkerPool",
        params={"workerPoolId": "proj/ci"},
        payload={"providerId": "aws"},
        now=NOW,
    )
    assert body.model_dump() == {
        "code": "InputError",
        "message": "Invalid provider aws; keep {{absent}}\n\n---\n\n"
        "* method:     createWorkerPool\n"
        "* errorCode:  InputError\n"
        "* statusCode: 400\n"
        "* time:       2019-10-18T21:16:41.593Z",
        "requestInfo": {
            "method": "createWorkerPool",
            "params": {"workerPoolId": "proj/ci"},
            "payload": {"providerId": "aws"},
            "time": "2019-10-18T21:16:41.593Z",
        },
    }
    # The client reads exactly these keys back.
    assert set(ErrorBody.model_validate_json(body.model_dump_json()).model_dump()) == {
        "code",
        "message",
        "requestInfo",
    }


def test_insufficient_scopes_names_the_missing_and_the_required_expression():
    required = {"AllOf": ["a:1", "b:2"]}
    error = insufficient_scopes("worker/aws/p/c/g/w", required, "b:2")
    message = error_body(error, method="m", params={}, payload={}, now=NOW).message
    assert message.startswith(
        "Client ID worker/aws/p/c/g/w does not have sufficient scopes and is missing the "
        "following scopes:\n\n```\nb:2\n```\n\n"
        "This request requires the client to satisfy the following scope expression:\n\n"
        '```\n{\n  "AllOf": [\n    "a:1",\n    "b:2"\n  ]\n}\n```'
    )
    assert error.status == 403


def test_insufficient_scopes_without_credentials_asks_for_credentials():
    error = insufficient_scopes(None, "worker-manager:list-worker-pools", None)
    message = error_body(error, method="m", params={}, payload={}, now=NOW).message
    assert message.startswith(
        "This request requires Taskcluster credentials that satisfy the following scope "
        "expression:\n\n```\nworker-manager:list-worker-pools\n```"
    )
    assert "unsatisfied" not in error.details
