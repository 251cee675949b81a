"""Worker-pool errors counted for `workerPoolErrorStats`: by UTC hour, title, code, pool and
launch config, in two statements on one transaction (the database's clock, then every count).

Source: TC `db/versions/0096.yml` (`get_worker_pool_error_stats_last_24_hours`, `_last_7_days`,
`_titles`, `_codes`), `0097.yml` (`_worker_pools`) and `0105.yml` (`_launch_configs`),
taskcluster/taskcluster @ 9d59eb59. Worker-manager runs six statements; here one scan groups
by every breakdown at once (GROUPING SETS). Its time buckets are `date_trunc` in the session's
time zone; wm truncates in UTC whatever the server's setting, and counts errors by UTC hour from
the first day's start on, so the API builds both its daily and hourly buckets from one read
(wm/api/views.py). The other breakdowns, as worker-manager's, count every stored error (the
expiry job keeps that to the retention).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import Engine, Select, case, func, select

from wm.db.tables import worker_pool_errors

# TC get_worker_pool_error_codes: COALESCE(extra->>'code', 'other'). It groups by the raw code,
# so errors without one and errors whose code is "other" are two rows for one key (whichever
# comes last wins); here they are grouped, and counted, together.
NO_CODE = "other"
# The breakdowns, in the order of the grouped statement's columns.
BREAKDOWNS = ("hour", "title", "code", "pool_id", "launch_config_id")


@dataclass(frozen=True)
class ErrorCounts:
    """What `error_counts` read; only non-zero counts."""

    now: datetime  # the database's clock at the read
    since: datetime  # `by_hour` counts errors reported at or after this instant
    by_hour: dict[datetime, int] = field(default_factory=dict)  # UTC hour start -> errors
    by_title: dict[str, int] = field(default_factory=dict)
    by_code: dict[str, int] = field(default_factory=dict)  # extra.code, or NO_CODE
    by_pool: dict[str, int] = field(default_factory=dict)
    # Launch config id (None: an error of no launch config) -> errors.
    by_launch_config: dict[str | None, int] = field(default_factory=dict)


def error_counts(
    engine: Engine,
    pool_id: str | None,
    since_of: Callable[[datetime], datetime],
) -> ErrorCounts:
    """The errors of `pool_id` (of every pool when None) counted by each breakdown.

    `since_of(now)` is the first instant hours are counted from, given the database's clock.
    """
    with engine.connect() as conn:  # one transaction: now() stays what it was read as
        now = conn.execute(select(func.now())).scalar_one().astimezone(UTC)
        since = since_of(now)
        rows = conn.execute(_grouped(pool_id, since)).all()
    found: dict[str, dict] = {name: {} for name in BREAKDOWNS}
    for row in rows:
        values, absent, count = row[:5], row[5:10], row[10]
        position = absent.index(0)  # GROUPING() is 0 for the set's own column only
        breakdown, key = BREAKDOWNS[position], values[position]
        if breakdown == "hour":
            if key is None:  # reported before `since`: counted in no hour
                continue
            key = key.replace(tzinfo=UTC)  # timezone('UTC', ...) is a UTC wall-clock time
        found[breakdown][key] = count
    return ErrorCounts(
        now=now,
        since=since,
        by_hour=found["hour"],
        by_title=found["title"],
        by_code=found["code"],
        by_pool=found["pool_id"],
        by_launch_config=found["launch_config_id"],
    )


def _grouped(pool_id: str | None, since: datetime) -> Select:
    errors = worker_pool_errors.c
    hour = case(
        (errors.reported >= since, func.date_trunc("hour", func.timezone("UTC", errors.reported))),
        else_=None,
    )
    code = func.coalesce(errors.extra["code"].astext, NO_CODE)
    rows = select(
        hour.label("hour"),
        errors.title,
        code.label("code"),
        errors.pool_id,
        errors.launch_config_id,
    )
    if pool_id is not None:
        rows = rows.where(errors.pool_id == pool_id)
    inner = rows.subquery()
    # Grouped over the subquery's columns: a computed expression repeated in GROUP BY would
    # carry bind parameters of its own, which Postgres does not see as the same expression.
    columns = [inner.c[name] for name in BREAKDOWNS]
    return select(
        *columns,
        *(func.grouping(c) for c in columns),
        func.count(),
    ).group_by(func.grouping_sets(*columns))
