"""Pool errors on real Postgres: counted for workerPoolErrorStats (by UTC hour from a given
instant, by title, code, pool and launch config, all in one read), and expired by the
provisioner's job past the configured retention (by default worker-manager's 7 days)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, func, select, text

from procs.provisioner import expire_errors
from tests.support.configs import build, raw
from wm.config.loader import RetentionConfig
from wm.db.error_stats import error_counts
from wm.db.tables import worker_pool_errors

POOLS = ("proj/a", "proj/b")


@pytest.fixture
def pools(engine: Engine) -> Sequence[str]:
    with engine.begin() as conn:
        for pool_id in POOLS:
            conn.execute(
                text(
                    "INSERT INTO worker_pools (pool_id, provider_id, min_capacity, max_capacity,"
                    " scaling_ratio, registration_timeout_s, reregistration_timeout_s,"
                    " queue_inactivity_timeout_s, requires_registration)"
                    " VALUES (:p, 'aws', 0, 1, 1, 900, 3600, 7200, true)"
                ),
                {"p": pool_id},
            )
    return POOLS


def database_now(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(select(func.now())).scalar_one().astimezone(UTC)


def add_error(
    engine: Engine,
    reported: datetime,
    *,
    pool_id: str = POOLS[0],
    title: str = "launch failed",
    extra: dict[str, Any] | None = None,
    launch_config_id: str | None = None,
) -> None:
    with engine.begin() as conn:
        conn.execute(
            worker_pool_errors.insert().values(
                pool_id=pool_id,
                kind="launch-failure",
                title=title,
                description="",
                extra=extra or {},
                launch_config_id=launch_config_id,
                reported=reported,
            )
        )


def hour(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def stored_times(engine: Engine) -> list[datetime]:
    with engine.connect() as conn:
        return sorted(conn.execute(select(worker_pool_errors.c.reported)).scalars())


def test_errors_are_counted_by_hour_from_the_given_instant_and_by_each_breakdown(engine, pools):
    now = database_now(engine)
    a, b = pools
    add_error(engine, now - timedelta(minutes=30), title="quota", extra={"code": "Quota"})
    add_error(engine, now - timedelta(hours=3), title="quota", extra={"code": "Quota"})
    add_error(engine, now - timedelta(hours=3, minutes=1), launch_config_id="lc-1")
    add_error(engine, now - timedelta(days=2), pool_id=b, launch_config_id="lc-2")
    add_error(engine, now - timedelta(days=8))  # before `since`: in no hour, in every breakdown

    counts = error_counts(engine, None, lambda _now: now - timedelta(days=7))

    assert counts.since == now - timedelta(days=7)
    assert now <= counts.now < now + timedelta(minutes=1)
    expected_hours: dict[datetime, int] = {}
    for reported in (timedelta(minutes=30), timedelta(hours=3), timedelta(hours=3, minutes=1)):
        key = hour(now - reported)
        expected_hours[key] = expected_hours.get(key, 0) + 1
    expected_hours[hour(now - timedelta(days=2))] = 1
    assert counts.by_hour == expected_hours
    assert all(h.tzinfo == UTC for h in counts.by_hour)
    assert counts.by_title == {"quota": 2, "launch failed": 3}
    assert counts.by_code == {"Quota": 2, "other": 3}
    assert counts.by_pool == {a: 4, b: 1}
    assert counts.by_launch_config == {None: 3, "lc-1": 1, "lc-2": 1}


def test_one_pools_counts_leave_the_other_pools_errors_out(engine, pools):
    now = database_now(engine)
    a, b = pools
    add_error(engine, now - timedelta(hours=1), pool_id=a, launch_config_id="lc-1")
    add_error(engine, now - timedelta(hours=1), pool_id=b, launch_config_id="lc-2")

    counts = error_counts(engine, b, lambda _now: now - timedelta(days=7))

    assert counts.by_hour == {hour(now - timedelta(hours=1)): 1}
    assert counts.by_pool == {b: 1}
    assert counts.by_launch_config == {"lc-2": 1}


def test_no_errors_count_nothing(engine, pools):
    counts = error_counts(engine, pools[0], lambda now: now - timedelta(days=7))

    assert counts.by_hour == counts.by_title == counts.by_code == counts.by_pool == {}
    assert counts.by_launch_config == {}


def test_hours_are_utc_hours_whatever_the_sessions_time_zone(engine, pools):
    # Kolkata is UTC+05:30: its hours start half-way through UTC's.
    kolkata = create_engine(engine.url, connect_args={"options": "-c TimeZone=Asia/Kolkata"})
    try:
        now = database_now(kolkata)
        add_error(kolkata, now - timedelta(hours=2))

        counts = error_counts(kolkata, None, lambda _now: now - timedelta(days=1))
    finally:
        kolkata.dispose()

    assert counts.by_hour == {hour(now - timedelta(hours=2)): 1}


def test_the_job_deletes_errors_past_seven_days_and_keeps_the_younger(engine, pools, caplog):
    now = database_now(engine)
    for age in (timedelta(days=30), timedelta(days=7, minutes=1)):
        add_error(engine, now - age, title="old")
    for age in (timedelta(days=6, hours=23), timedelta(hours=1)):
        add_error(engine, now - age, title="young")
    young = [t for t in stored_times(engine) if t > now - timedelta(days=7)]

    with caplog.at_level(logging.INFO, logger="wm"):
        deleted = expire_errors(engine, RetentionConfig())  # a config without [retention]
        again = expire_errors(engine, RetentionConfig())

    assert (deleted, again) == (2, 0)
    assert stored_times(engine) == young
    logged = [
        r.wm_fields for r in caplog.records if getattr(r, "wm_event", None) == "pool-errors-expired"
    ]
    assert logged == [
        {"deleted": 2, "retention_days": 7},
        {"deleted": 0, "retention_days": 7},
    ]


def test_the_job_keeps_errors_for_a_longer_configured_retention(engine, pools):
    config = build(raw(retention={"pool_errors_s": 30 * 24 * 3600.0}))
    now = database_now(engine)
    add_error(engine, now - timedelta(days=31), title="past the retention")
    add_error(engine, now - timedelta(days=8), title="older than 7 days, within 30")

    deleted = expire_errors(engine, config.retention)

    assert deleted == 1
    assert stored_times(engine) == [now - timedelta(days=8)]


def test_the_expiry_reads_the_errors_by_their_time_not_the_whole_table(engine, pools):
    with engine.connect() as conn:
        conn.execute(text("SET enable_seqscan = off"))  # a tiny table: make the plan honest
        plan = "\n".join(
            conn.execute(
                text(
                    "EXPLAIN DELETE FROM worker_pool_errors"
                    " WHERE reported < now() - interval '7 days'"
                )
            ).scalars()
        )

    assert "ix_worker_pool_errors_reported" in plan
