"""Latency by stage: which timestamps bound each stage, and which stage is the slowest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wm.model import WorkerRecord, WorkerState
from wm.workers.stages import STAGE_NAMES, durations, ended_between, slowest, summarise

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def at(seconds: float | None) -> datetime | None:
    return None if seconds is None else T0 + timedelta(seconds=seconds)


def worker(**stamps: float | None) -> WorkerRecord:
    """A worker created at T0 + `created` (default 0) with the given stage stamps, in seconds."""
    created = stamps.pop("created", 0.0)
    return WorkerRecord(
        worker_id="w",
        pool_id="p",
        worker_group="r",
        provider_id="prov",
        state=WorkerState.RUNNING,
        capacity=1,
        launch_config_id="lc",
        created=at(created),
        last_modified=at(created),
        idempotency_token="t",
        **{f"{name}": at(value) for name, value in stamps.items()},
    )


FULL_LIFE = dict(
    demand_at=-4,
    accepted_at=1,
    cloud_running_at=31,
    registered_at=41,
    first_claimed_at=42,
    stopping_at=300,
    delete_called_at=305,
    stopped_at=365,
)


@pytest.mark.parametrize(
    ("scenario", "stamps", "expected"),
    [
        (
            "a whole life",
            FULL_LIFE,
            {
                "pending_to_requested": 4,
                "requested_to_accepted": 1,
                "accepted_to_running": 30,
                "running_to_registered": 10,
                "registered_to_claim": 1,
                "decided_to_delete": 5,
                "delete_to_gone": 60,
            },
        ),
        ("just requested: no stage done yet", {}, {}),
        (
            "registered before any scan saw it run: registration proves it runs",
            dict(accepted_at=1, registered_at=20),
            {"requested_to_accepted": 1, "accepted_to_running": 19, "running_to_registered": 0},
        ),
        (
            "a scan saw it run after it registered: the registration counts",
            dict(accepted_at=1, cloud_running_at=50, registered_at=20),
            {"requested_to_accepted": 1, "accepted_to_running": 19, "running_to_registered": 0},
        ),
        (
            "died out of band: gone without a delete call",
            dict(accepted_at=1, stopping_at=10, stopped_at=12),
            {"requested_to_accepted": 1},
        ),
        (
            "a demand from the Taskcluster queue has no time",
            dict(accepted_at=2),
            {"requested_to_accepted": 2},
        ),
    ],
)
def test_stage_durations(scenario, stamps, expected):
    assert durations(worker(**stamps)) == pytest.approx(expected), scenario


def test_stages_ending_in_a_window_are_counted_once():
    life = worker(**FULL_LIFE)
    names = ("running_to_registered", "registered_to_claim")
    first = ended_between(life, at(0), at(41), names)
    second = ended_between(life, at(41), at(60), names)
    assert (first, second) == ({"running_to_registered": 10}, {"registered_to_claim": 1})
    assert ended_between(life, None, at(40), names) == {}


def test_summaries_and_the_slowest_stage():
    fleet = [worker(**FULL_LIFE), worker(accepted_at=1, registered_at=121)]

    summary = summarise(fleet)

    assert set(summary) == set(STAGE_NAMES)
    assert summary["requested_to_accepted"].count == 2
    assert summary["accepted_to_running"].p95_s == 120
    assert summary["delete_to_gone"].p50_s == 60
    assert slowest(summary).stage == "accepted_to_running"
    assert slowest(summarise([])) is None


@pytest.mark.parametrize(
    ("names", "stamps", "expected"),
    [
        # What the provisioner observes when it commits intents, then when the cloud accepts.
        (["pending_to_requested"], FULL_LIFE, {"pending_to_requested": 4}),
        (["requested_to_accepted"], dict(accepted_at=3), {"requested_to_accepted": 3}),
        (["pending_to_requested"], dict(accepted_at=3), {}),  # no demand time: nothing
        # What a scan observes when it first sees the VM run, sends a delete, sees it gone.
        (
            ["accepted_to_running"],
            dict(accepted_at=1, cloud_running_at=31),
            {"accepted_to_running": 30},
        ),
        (
            ["decided_to_delete"],
            dict(stopping_at=10, delete_called_at=12),
            {"decided_to_delete": 2},
        ),
        (["delete_to_gone"], dict(delete_called_at=12, stopped_at=72), {"delete_to_gone": 60}),
        (["delete_to_gone"], dict(stopping_at=10, stopped_at=12), {}),  # gone without a delete
        (["delete_to_gone"], dict(delete_called_at=12, stopped_at=11), {"delete_to_gone": 0}),
        ([], FULL_LIFE, {}),
    ],
)
def test_the_named_stages_of_a_worker(names, stamps, expected):
    assert durations(worker(**stamps), names) == pytest.approx(expected)


def test_an_unknown_stage_name_is_an_error_not_a_silent_nothing():
    with pytest.raises(ValueError, match="no such stage"):
        durations(worker(**FULL_LIFE), ["delete_too_gone"])


def test_a_reported_boot_ends_the_accepted_stage_before_any_scan_saw_the_vm():
    booted_first = worker(accepted_at=5, booted_at=40, registered_at=60, cloud_running_at=90)
    found = durations(booted_first, ["accepted_to_running", "running_to_registered"])
    assert found == {"accepted_to_running": 35.0, "running_to_registered": 20.0}
