"""The AWS provider's pure tables: instance states and error codes."""

from __future__ import annotations

import pytest

from wm.errors import ErrorCategory, UnknownCloudState
from wm.model import WorkerState
from wm.providers.aws.errors import category_for, scrub
from wm.providers.aws.instances import STATES, map_state
from wm.providers.aws.run_request import client_token


@pytest.mark.parametrize(
    ("ec2_state", "expected"),
    [
        ("pending", WorkerState.REQUESTED),
        ("running", WorkerState.RUNNING),
        ("shutting-down", WorkerState.STOPPING),
        ("stopping", WorkerState.STOPPING),
        ("stopped", WorkerState.STOPPED),
        ("terminated", WorkerState.STOPPED),
    ],
)
def test_every_ec2_state_has_a_wm_state(ec2_state: str, expected: WorkerState):
    assert map_state("aws-test", ec2_state) is expected


def test_the_table_covers_exactly_the_six_ec2_states():
    assert set(STATES) == {
        "pending",
        "running",
        "shutting-down",
        "stopping",
        "stopped",
        "terminated",
    }


def test_an_unknown_state_is_an_error_not_a_guess():
    with pytest.raises(UnknownCloudState) as raised:
        map_state("aws-test", "hibernating")
    assert raised.value.state == "hibernating"


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("RequestLimitExceeded", 503, ErrorCategory.THROTTLED),
        ("Throttling", 400, ErrorCategory.THROTTLED),
        ("ThrottlingException", 400, ErrorCategory.THROTTLED),
        ("InternalError", 500, ErrorCategory.TRANSIENT),
        ("Unavailable", 503, ErrorCategory.TRANSIENT),
        ("SomethingNew", 502, ErrorCategory.TRANSIENT),
        ("InstanceLimitExceeded", 400, ErrorCategory.QUOTA),
        ("InsufficientInstanceCapacity", 500, ErrorCategory.CAPACITY),
        ("VcpuLimitExceeded", 400, ErrorCategory.QUOTA),
        ("MaxSpotInstanceCountExceeded", 400, ErrorCategory.QUOTA),
        ("InvalidAMIID.NotFound", 400, ErrorCategory.BAD_CONFIG),
        ("InvalidAMIID.Malformed", 400, ErrorCategory.BAD_CONFIG),
        ("InvalidParameterValue", 400, ErrorCategory.BAD_CONFIG),
        ("AuthFailure", 401, ErrorCategory.BAD_CONFIG),
        ("UnauthorizedOperation", 403, ErrorCategory.BAD_CONFIG),
        ("InvalidInstanceType", 400, ErrorCategory.BAD_CONFIG),
        ("InvalidSubnetID.NotFound", 400, ErrorCategory.BAD_CONFIG),
        ("SomethingNew", 400, ErrorCategory.BAD_CONFIG),
        ("InvalidInstanceID.NotFound", 400, ErrorCategory.NOT_FOUND),
    ],
)
def test_error_codes_map_to_categories(code: str, status: int, expected: ErrorCategory):
    assert category_for(code, status) is expected


def test_a_long_batch_token_becomes_a_validclient_token():
    assert client_token("b-1") == "b-1"
    long = client_token("x" * 100)
    assert len(long) == 64
    assert long == client_token("x" * 100)  # stable across retries


def test_access_key_ids_are_scrubbed_from_messages():
    assert scrub("key AKIAABCDEFGHIJKLMNOP is bad") == "key <access-key-id> is bad"
