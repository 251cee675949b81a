"""Pure parts of the GCP provider and the simulated GCE: state table, error table, labels,
request ids, list filters."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import requests
from google.api_core import exceptions as gexc
from google.auth.exceptions import DefaultCredentialsError
from google.cloud import compute_v1

from wm.errors import ErrorCategory, UnknownCloudState
from wm.model import WorkerState
from wm.providers.gcp.errors import classify, operation_error
from wm.providers.gcp.insert_body import request_id
from wm.providers.gcp.provider import _label_value
from wm.providers.gcp.states import STATES, stop_reason, worker_state
from wmsim.gcp.errors import ApiError
from wmsim.gcp.list_filter import list_filter


def test_every_status_the_sdk_knows_has_a_state():
    known = {s.name for s in compute_v1.Instance.Status if s.name != "UNDEFINED_STATUS"}
    assert known == set(STATES)


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("PROVISIONING", WorkerState.REQUESTED),
        ("STAGING", WorkerState.REQUESTED),
        ("RUNNING", WorkerState.RUNNING),
        ("REPAIRING", WorkerState.RUNNING),
        ("STOPPING", WorkerState.STOPPING),
        ("SUSPENDING", WorkerState.STOPPING),
        ("STOPPED", WorkerState.STOPPED),
        ("SUSPENDED", WorkerState.STOPPED),
        ("TERMINATED", WorkerState.STOPPED),
    ],
)
def test_gce_statuses_map_to_worker_states(status: str, state: WorkerState):
    assert worker_state("gcp", status) is state


def test_an_unknown_status_is_an_error_not_a_guess():
    with pytest.raises(UnknownCloudState, match="HIBERNATING"):
        worker_state("gcp", "HIBERNATING")


def test_stop_reasons():
    assert stop_reason("TERMINATED", spot=True) == "preempted"
    assert stop_reason("TERMINATED", spot=False) == "terminated"
    assert stop_reason("SUSPENDED", spot=True) == "suspended"
    assert stop_reason("RUNNING", spot=True) is None


def test_label_values_follow_gce_rules():
    assert _label_value("proj-ci/linux-large") == "proj-ci_linux-large"
    assert _label_value("Pool.A") == "pool_a"
    assert len(_label_value("x" * 100)) == 63


def test_request_ids_are_uuids_and_stable():
    token = "intent-42"
    assert request_id(token) == request_id(token)
    assert uuid.UUID(request_id(token)).version == 5
    already = str(uuid.uuid4())
    assert request_id(already) == already
    zero = str(uuid.UUID(int=0))
    assert request_id(zero) != zero  # GCE refuses the zero UUID


def http_error(
    status: int, reason: str | None = None, *, info: str | None = None, retry_after: str = ""
) -> gexc.GoogleAPICallError:
    """The exception google-api-core raises for a REST answer of this shape."""
    error: dict[str, Any] = {"code": status, "message": f"answer {status}"}
    if reason:
        error["errors"] = [{"reason": reason, "domain": "global", "message": "m"}]
    if info:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": info}]
    response = requests.Response()
    response.status_code = status
    response._content = json.dumps({"error": error}).encode()
    if retry_after:
        response.headers["Retry-After"] = retry_after
    response.request = requests.Request("GET", "http://127.0.0.1/compute/v1/x").prepare()
    return gexc.from_http_response(response)


@pytest.mark.parametrize(
    ("exc", "category", "code"),
    [
        (http_error(403, "rateLimitExceeded"), ErrorCategory.THROTTLED, "rateLimitExceeded"),
        (http_error(403, "userRateLimitExceeded"), ErrorCategory.THROTTLED, None),
        (http_error(429, info="RATE_LIMIT_EXCEEDED"), ErrorCategory.THROTTLED, None),
        (http_error(429), ErrorCategory.THROTTLED, "http-429"),
        (http_error(403, "quotaExceeded"), ErrorCategory.QUOTA, "quotaExceeded"),
        (http_error(403, info="ZONE_RESOURCE_POOL_EXHAUSTED"), ErrorCategory.CAPACITY, None),
        (http_error(503, "backendError"), ErrorCategory.TRANSIENT, "backendError"),
        (http_error(500), ErrorCategory.TRANSIENT, None),
        (http_error(400, "resourceNotReady"), ErrorCategory.TRANSIENT, None),
        (http_error(404, "notFound"), ErrorCategory.NOT_FOUND, "notFound"),
        (http_error(400, "invalid"), ErrorCategory.BAD_CONFIG, "invalid"),
        (http_error(403, "forbidden"), ErrorCategory.BAD_CONFIG, None),
        (http_error(401, "required"), ErrorCategory.BAD_CONFIG, None),
        (http_error(409, "alreadyExists"), ErrorCategory.BAD_CONFIG, "alreadyExists"),
        (requests.ConnectionError("refused"), ErrorCategory.TRANSIENT, "ConnectionError"),
        (requests.ReadTimeout("slow"), ErrorCategory.TRANSIENT, None),
        (DefaultCredentialsError("none"), ErrorCategory.BAD_CONFIG, None),
        (ValueError("bug"), ErrorCategory.BAD_CONFIG, None),
    ],
)
def test_sdk_errors_are_classified_once(exc: BaseException, category: ErrorCategory, code: str):
    error = classify("gcp", exc)
    assert error.category is category
    if code:
        assert error.code == code


def test_retry_after_is_kept():
    assert classify("gcp", http_error(429, retry_after="2")).retry_after_s == 2.0
    assert classify("gcp", http_error(429)).retry_after_s is None


def operation(status: str, code: str | None = None, http: int = 0) -> compute_v1.Operation:
    op = compute_v1.Operation(name="op", status=status, operation_type="insert")
    if code:
        op.error = compute_v1.Error(errors=[compute_v1.Errors(code=code, message="why")])
        op.http_error_status_code = http
    return op


def test_operations_finished_with_an_error_are_classified():
    def category(op: compute_v1.Operation) -> ErrorCategory | None:
        error = operation_error("gcp", op, "instances.insert")
        return error.category if error else None

    assert category(operation("DONE")) is None
    assert category(operation("RUNNING")) is None
    assert category(operation("DONE", "QUOTA_EXCEEDED", 403)) is ErrorCategory.QUOTA
    assert (
        category(operation("DONE", "ZONE_RESOURCE_POOL_EXHAUSTED", 503)) is ErrorCategory.CAPACITY
    )
    assert category(operation("DONE", "RESOURCE_NOT_FOUND", 404)) is ErrorCategory.NOT_FOUND
    assert category(operation("DONE", "SOMETHING_ELSE", 400)) is ErrorCategory.BAD_CONFIG
    assert category(operation("DONE", "SOMETHING_ELSE", 503)) is ErrorCategory.TRANSIENT


ITEM = {"name": "w-1", "status": "RUNNING", "labels": {"wm-deployment": "d", "wm-pool": "p"}}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ('labels.wm-deployment = "d"', True),
        ('labels.wm-deployment = "e"', False),
        ('(labels.wm-deployment = "d") AND (labels.wm-pool = "p")', True),
        ('(labels.wm-deployment = "d") AND (labels.wm-pool = "q")', False),
        ('labels.wm-deployment = "d" labels.wm-pool = "p"', True),
        ('(labels.wm-pool = "q") OR (status = RUNNING)', True),
        ("NOT status = RUNNING", False),
        ("-status = RUNNING", False),
        ("status != RUNNING", False),
        ("labels.wm-pool:*", True),
        ("labels.other:*", False),
        ('name : "w-"', True),
    ],
)
def test_the_simulated_list_filter(text: str, matches: bool):
    assert list_filter(text)(ITEM) is matches


@pytest.mark.parametrize("text", ['labels.a = "b" AND', "(status = RUNNING", 'labels.a "b"'])
def test_a_malformed_filter_is_a_400(text: str):
    with pytest.raises(ApiError) as raised:
        list_filter(text)
    assert raised.value.status == 400
