"""What a Sentry event says (wm/ops/error_reports.py) and how often a repeat is sent
(wm/ops/repeats.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError

from wm.errors import CloudError, ErrorCategory
from wm.ops.error_reports import describe
from wm.ops.repeats import Admission, RepeatLimiter

KINDS = {"aws-prod": "aws", "gcp-prod": "gcp"}
SCAN_SCOPE = {"process": "scanner-aws", "job": "scan:aws-prod:us-east-1", "provider": "aws-prod"}


def raised(error: BaseException, cause: BaseException | None = None) -> BaseException:
    try:
        raise error from cause
    except BaseException as exc:
        return exc


def unreachable(operation: str, code: str, request_id: str, category=ErrorCategory.TRANSIENT):
    sdk = ConnectionRefusedError(f"could not connect (request {request_id})")
    return raised(CloudError("aws-prod", category, code, str(sdk), operation=operation), sdk)


def test_a_failed_scan_is_tagged_with_what_people_filter_on():
    exc = unreachable("DescribeInstances", "EndpointConnectionError", "r-1")

    report = describe(
        "pass-failed", {"region": "us-east-1", "consecutive_failures": 3}, SCAN_SCOPE, exc, KINDS
    )

    assert report.tags == {
        "process": "scanner-aws",
        "provider": "aws-prod",
        "provider_kind": "aws",
        "region": "us-east-1",
        "job": "scan:aws-prod:us-east-1",
        "job_kind": "scan",
        "log_event": "pass-failed",
        "error_category": "transient",
        "error_code": "EndpointConnectionError",
        "operation": "DescribeInstances",
    }


def test_an_unreachable_cloud_is_one_issue_per_provider_and_operation_whatever_the_message():
    def key(exc: BaseException, job: str = "scan:aws-prod:us-east-1") -> tuple[str, ...]:
        return describe("pass-failed", {}, {**SCAN_SCOPE, "job": job}, exc, KINDS).fingerprint

    refused = key(unreachable("DescribeInstances", "EndpointConnectionError", "r-1"))
    timed_out = key(unreachable("DescribeInstances", "Timeout", "r-2"), "scan:aws-prod:eu-west-1")
    paused = key(unreachable("DescribeInstances", "Paused", "r-3", ErrorCategory.PAUSED))
    assert refused == timed_out == paused == ("cloud-unavailable", "aws-prod", "DescribeInstances")
    assert key(unreachable("RunInstances", "Timeout", "r-4")) != refused
    # A refusal is a thing to fix, told by its code.
    quota = key(unreachable("RunInstances", "InstanceLimitExceeded", "r-5", ErrorCategory.QUOTA))
    assert quota == ("cloud-quota", "InstanceLimitExceeded", "aws-prod", "RunInstances")


@pytest.mark.parametrize(
    ("event", "scope"),
    [
        ("pass-failed", SCAN_SCOPE),
        ("pass-failed", {"process": "provisioner-aws", "job": "provision:aws-prod"}),
        ("api-database-error", {"process": "web"}),
    ],
)
def test_the_database_out_of_reach_is_one_issue_wherever_it_was_met(event, scope):
    down = raised(OperationalError("SELECT 1", {}, ConnectionRefusedError("port 5432, pid 4711")))

    report = describe(event, {}, scope, down, KINDS)

    assert report.fingerprint == ("database-unavailable",)
    assert report.tags["error_category"] == "database-unavailable"


def test_a_bug_is_one_issue_per_type_and_place_whichever_provider_met_it():
    def bug(value: str) -> BaseException:
        try:
            {}[value]
        except KeyError as exc:
            return exc
        raise AssertionError("unreachable")

    first = describe("pass-failed", {}, SCAN_SCOPE, bug("worker-1"), KINDS)
    gcp_scope = {"process": "scanner-gcp", "job": "scan:gcp-prod:eu", "provider": "gcp-prod"}
    second = describe("pass-failed", {}, gcp_scope, bug("worker-2"), KINDS)

    assert first.fingerprint == second.fingerprint
    assert first.fingerprint[:3] == ("pass-failed", "job_kind=scan", "KeyError")
    assert first.fingerprint[3].endswith(":bug")  # where it was raised
    assert (first.tags["provider_kind"], second.tags["provider_kind"]) == ("aws", "gcp")


def test_a_message_without_an_exception_is_told_apart_by_its_subject():
    def key(pool: str) -> tuple[str, ...]:
        fields = {"pool": pool, "existing": 412, "max_capacity": 100}
        return describe("capacity-far-above-max", fields, {"process": "p"}, None, KINDS).fingerprint

    assert key("proj/a") == ("capacity-far-above-max", "pool=proj/a")
    assert key("proj/a") != key("proj/b")


def test_a_repeat_within_the_window_is_counted_not_sent_and_the_next_one_says_how_many():
    limiter = RepeatLimiter(window_s=60)

    sent = [limiter.admit("db", at) for at in (0, 1, 2, 59)]
    assert [a.send for a in sent] == [True, False, False, False]
    assert limiter.admit("other", 5) == Admission(send=True, suppressed=0)
    assert limiter.admit("db", 61) == Admission(send=True, suppressed=3)
    assert limiter.admit("db", 62).send is False


def test_a_window_of_zero_sends_every_report():
    limiter = RepeatLimiter(window_s=0)

    assert all(limiter.admit("db", at).send for at in (0, 0, 1))
