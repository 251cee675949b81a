"""Which failed creates stop their row at once, and which leave it open because the VM may
exist (wm.provisioner.judge_results): a table of what the cloud, or the gate, said."""

from __future__ import annotations

import pytest

from wm.errors import CloudError, ErrorCategory
from wm.providers.base import LaunchBatch, LaunchIntent, LaunchResult, LaunchSpec
from wm.provisioner import judge_results

SPEC = LaunchSpec("lc", "r1", "m", "img", 1)
BATCH = LaunchBatch("p", SPEC, (LaunchIntent("w1", "t1"),), "b1")


def error(category: ErrorCategory, code: str = "X", maybe_applied: bool = False) -> CloudError:
    return CloudError("prov", category, code, "m", maybe_applied=maybe_applied)


@pytest.mark.parametrize(
    ("scenario", "failure", "stopped"),
    [
        ("quota: the cloud refused", error(ErrorCategory.QUOTA), True),
        ("bad config: the cloud refused", error(ErrorCategory.BAD_CONFIG), True),
        ("throttled on every attempt", error(ErrorCategory.THROTTLED), True),
        ("refused unsent: the provider is paused", error(ErrorCategory.PAUSED, "Paused"), True),
        (
            "paused after an attempt whose answer was lost",
            error(ErrorCategory.PAUSED, "Paused", maybe_applied=True),
            False,
        ),
        (
            "the process stopped during a backoff after a timeout",
            error(ErrorCategory.PAUSED, "ShuttingDown", maybe_applied=True),
            False,
        ),
        ("a timeout", error(ErrorCategory.TRANSIENT, "Timeout", maybe_applied=True), False),
        ("a 5xx", error(ErrorCategory.TRANSIENT, "InternalError", maybe_applied=True), False),
        (
            "throttled after a 5xx",
            error(ErrorCategory.THROTTLED, "RequestLimitExceeded", maybe_applied=True),
            False,
        ),
    ],
)
def test_a_failed_create_stops_its_row_only_when_nothing_was_made(scenario, failure, stopped):
    outcomes, errors = judge_results("prov", [BATCH], {"w1": LaunchResult("w1", None, failure)})
    (outcome,) = outcomes
    assert outcome.cloud_id is None
    assert (outcome.stop_reason is not None) is stopped, scenario
    # Either way the pool's errors say what happened.
    assert [e.launch_config_id for e in errors] == ["lc"]


def test_a_create_without_any_result_may_have_made_its_vm():
    (outcome,), _ = judge_results("prov", [BATCH], {})
    assert outcome.stop_reason is None
