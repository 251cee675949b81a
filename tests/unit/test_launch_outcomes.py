"""Which failed creates stop their row at once, and which leave it open because the VM may
exist (wm.provisioning.launch_outcomes.judge_results): a table of what the cloud, or the gate,
said."""

from __future__ import annotations

import pytest

from wm.errors import SHUTTING_DOWN, CloudError, ErrorCategory
from wm.providers.base import LaunchBatch, LaunchIntent, LaunchResult, LaunchSpec
from wm.provisioning.launch_outcomes import judge_results

SPEC = LaunchSpec("lc", "r1", "m", "img", 1)
BATCH = LaunchBatch("p", SPEC, (LaunchIntent("w1", "t1"),), "b1")


def error(category: ErrorCategory, code: str = "X", maybe_applied: bool = False) -> CloudError:
    return CloudError("prov", category, code, "m", maybe_applied=maybe_applied)


@pytest.mark.parametrize(
    ("scenario", "failure", "stopped"),
    [
        ("quota: the cloud refused", error(ErrorCategory.QUOTA), True),
        ("capacity: the cloud has none to spare", error(ErrorCategory.CAPACITY), True),
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


@pytest.mark.parametrize(
    ("scenario", "failure", "withdrawn"),
    [
        ("the pass found the process stopping", error(ErrorCategory.PAUSED, SHUTTING_DOWN), True),
        (
            "the gate found it stopping while the first attempt waited for its turn",
            CloudError("prov", ErrorCategory.PAUSED, SHUTTING_DOWN, "m", operation="create"),
            True,
        ),
        (
            "it stopped during a backoff after an attempt whose answer was lost",
            error(ErrorCategory.PAUSED, SHUTTING_DOWN, maybe_applied=True),
            False,
        ),
        ("the provider is paused", error(ErrorCategory.PAUSED, "Paused"), False),
    ],
)
def test_a_create_never_sent_withdraws_its_intent_and_is_no_pool_error(
    scenario, failure, withdrawn
):
    # A worker whose create never left wm is no worker: it must neither end as a failed
    # launch (it would end stopped before any registration deadline) nor weigh its config.
    outcomes, errors = judge_results("prov", [BATCH], {"w1": LaunchResult("w1", None, failure)})
    (outcome,) = outcomes
    assert outcome.withdrawn is withdrawn, scenario
    assert (errors == []) is withdrawn, scenario
    if withdrawn:
        assert (outcome.cloud_id, outcome.stop_reason) == (None, None)
