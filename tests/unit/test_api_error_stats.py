"""workerPoolErrorStats' answer from the counts read (pure): every day of the last 7 and every
hour of the last 24, zeros included, keyed by the bucket's start as JavaScript's Date.toJSON
writes it (TC db/versions/0096.yml, WM api.js rowsToDict), total = the days' sum."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from wm.api.views import error_stats_since, error_stats_view
from wm.db.error_stats import ErrorCounts

NOW = datetime(2026, 12, 4, 10, 30, 15, 500000, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def counts(by_hour: dict[str, int], now: datetime = NOW, **breakdowns) -> ErrorCounts:
    return ErrorCounts(
        now=now,
        since=error_stats_since(now),
        by_hour={at(h): n for h, n in by_hour.items()},
        **breakdowns,
    )


def nonzero(buckets: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in buckets.items() if v}


def test_the_buckets_are_the_last_seven_utc_days_and_24_utc_hours_oldest_first():
    totals = error_stats_view(None, counts({})).totals

    assert list(totals.daily) == [f"2026-11-{d}T00:00:00.000Z" for d in range(28, 31)] + [
        f"2026-12-0{d}T00:00:00.000Z" for d in range(1, 5)
    ]
    assert list(totals.hourly) == [f"2026-12-03T{h:02d}:00:00.000Z" for h in range(11, 24)] + [
        f"2026-12-04T{h:02d}:00:00.000Z" for h in range(0, 11)
    ]
    assert set(totals.daily.values()) == set(totals.hourly.values()) == {0}
    assert totals.total == 0


@pytest.mark.parametrize(
    ("scenario", "by_hour", "daily", "hourly", "total"),
    [
        (
            "errors this hour and 23 hours back: both hours, two days",
            {"2026-12-04T10:00": 2, "2026-12-03T11:00": 1},
            {"2026-12-04T00:00:00.000Z": 2, "2026-12-03T00:00:00.000Z": 1},
            {"2026-12-04T10:00:00.000Z": 2, "2026-12-03T11:00:00.000Z": 1},
            3,
        ),
        (
            "24 hours back: its day, no hour",
            {"2026-12-03T10:00": 4},
            {"2026-12-03T00:00:00.000Z": 4},
            {},
            4,
        ),
        (
            "one day's hours add up",
            {"2026-11-30T01:00": 1, "2026-11-30T23:00": 2},
            {"2026-11-30T00:00:00.000Z": 3},
            {},
            3,
        ),
        (
            "the first day shown",
            {"2026-11-28T00:00": 5},
            {"2026-11-28T00:00:00.000Z": 5},
            {},
            5,
        ),
        (
            "later today (a clock ahead): today's count, in no hour, as worker-manager's series",
            {"2026-12-04T11:00": 1},
            {"2026-12-04T00:00:00.000Z": 1},
            {},
            1,
        ),
        ("tomorrow: nowhere", {"2026-12-05T00:00": 1}, {}, {}, 0),
    ],
)
def test_errors_fall_in_their_day_and_hour(scenario, by_hour, daily, hourly, total):
    totals = error_stats_view("proj/a", counts(by_hour)).totals

    assert nonzero(totals.daily) == daily, scenario
    assert nonzero(totals.hourly) == hourly, scenario
    assert totals.total == total, scenario


def test_the_clock_is_read_in_utc_whatever_its_offset():
    # 01:30 in UTC+05:00 is 20:30 UTC the day before.
    local = datetime(2026, 12, 5, 1, 30, tzinfo=timezone(timedelta(hours=5)))

    totals = error_stats_view(None, counts({}, now=local)).totals

    assert list(totals.daily)[-1] == "2026-12-04T00:00:00.000Z"
    assert list(totals.hourly)[-1] == "2026-12-04T20:00:00.000Z"
    assert error_stats_since(local) == at("2026-11-28T00:00")


def test_one_pools_stats_name_it_and_break_down_by_launch_config_unknown_for_none():
    found = counts(
        {},
        by_title={"quota": 2},
        by_code={"other": 2},
        by_pool={"proj/a": 2},
        by_launch_config={None: 1, "lc-1": 1},
    )

    answer = error_stats_view("proj/a", found)

    assert answer.workerPoolId == "proj/a"
    assert answer.totals.title == {"quota": 2}
    assert answer.totals.code == {"other": 2}
    assert answer.totals.workerPool == {"proj/a": 2}
    assert answer.totals.launchConfig == {"unknown": 1, "lc-1": 1}


def test_every_pools_stats_are_named_empty_and_have_no_launch_config_breakdown():
    found = counts({}, by_pool={"proj/a": 1, "proj/b": 2}, by_launch_config={"lc-1": 3})

    answer = error_stats_view(None, found)

    assert answer.workerPoolId == ""
    assert answer.totals.workerPool == {"proj/a": 1, "proj/b": 2}
    assert answer.totals.launchConfig == {}
