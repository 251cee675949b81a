"""The shared API budgets' statements: each take and each shrink is one atomic statement.

A bucket refills by elapsed time (the database's clock) at `per_s * shrink` up to
`burst * shrink`. A take always gets at least what it asked for, going into debt if the bucket
is short (the caller waits the debt out before calling the cloud, so the calls leave at the
bucket's pace), and up to `chunk` when the bucket has plenty: the extra is a small local
allowance that spares the next calls a round trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine, Float, and_, bindparam, case, cast, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert

from wm.db.engine import one_statement
from wm.db.tables import api_budgets

RECOVER_PER_S = 0.02  # after a shrink's hold: the share of the bucket regained per second
SHRINK_FLOOR = 0.1  # a throttled bucket never shrinks below this share


@dataclass(frozen=True)
class BucketKey:
    account: str
    scope: str  # a region, or "*" for the whole account
    call_class: str


@dataclass(frozen=True)
class Taken:
    granted: float  # tokens handed to the caller (>= what it asked for)
    tokens: float  # what the bucket holds now; negative is a debt to wait out
    rate_per_s: float  # the bucket's refill rate now (shrunk or not)

    @property
    def wait_s(self) -> float:
        return max(0.0, -self.tokens) / self.rate_per_s


def ensure_buckets(engine: Engine, limits: Mapping[BucketKey, tuple[float, float]]) -> None:
    """Create missing buckets full; keep the size and rate of existing ones up to date."""
    if not limits:
        return
    rows = [
        {
            "account": key.account,
            "scope": key.scope,
            "call_class": key.call_class,
            "tokens": burst,
            "burst": burst,
            "per_s": per_s,
        }
        for key, (burst, per_s) in limits.items()
    ]
    statement = insert(api_budgets).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=["account", "scope", "call_class"],
        set_={"burst": statement.excluded.burst, "per_s": statement.excluded.per_s},
    )
    with engine.begin() as conn:
        conn.execute(statement)


def _is(key: BucketKey):
    return and_(
        api_budgets.c.account == key.account,
        api_budgets.c.scope == key.scope,
        api_budgets.c.call_class == key.call_class,
    )


def _take_statement():
    """Take tokens from one bucket, as one statement with the bucket and amounts as parameters:
    built once, since building it costs more than running it (a take precedes every call)."""
    now = func.statement_timestamp()  # one instant for the whole statement
    elapsed = cast(func.extract("epoch", now - api_budgets.c.updated), Float)
    b = api_budgets.c
    recovered = case(
        (
            or_(b.shrink_until.is_(None), now >= b.shrink_until),
            func.least(1.0, b.shrink + elapsed * RECOVER_PER_S),
        ),
        else_=b.shrink,
    )
    current = (
        select(
            b.account,
            b.scope,
            b.call_class,
            recovered.label("shrink"),
            func.least(b.burst * recovered, b.tokens + elapsed * b.per_s * recovered).label(
                "refilled"
            ),
        )
        .where(
            b.account == bindparam("b_account"),
            b.scope == bindparam("b_scope"),
            b.call_class == bindparam("b_call_class"),
        )
        .with_for_update()
        .cte("current")
    )
    cost, chunk = bindparam("b_cost", type_=Float), bindparam("b_chunk", type_=Float)
    granted = func.greatest(cost, func.least(chunk, current.c.refilled))
    return (
        update(api_budgets)
        .where(
            b.account == current.c.account,
            b.scope == current.c.scope,
            b.call_class == current.c.call_class,
        )
        .values(shrink=current.c.shrink, tokens=current.c.refilled - granted, updated=now)
        .returning(granted.label("granted"), b.tokens, (b.per_s * b.shrink).label("rate"))
    )


_TAKE = _take_statement()


def take(engine: Engine, key: BucketKey, cost: float, chunk: float) -> Taken | None:
    """Take `cost` tokens (and up to `chunk` if the bucket has them); None: no such bucket."""
    params = {
        "b_account": key.account,
        "b_scope": key.scope,
        "b_call_class": key.call_class,
        "b_cost": cost,
        "b_chunk": chunk,
    }
    with one_statement(engine) as conn:  # atomic alone: no BEGIN and COMMIT round trips
        row = conn.execute(_TAKE, params).first()
    return None if row is None else Taken(row.granted, row.tokens, row.rate)


def shrink(engine: Engine, key: BucketKey, factor: float, hold: timedelta) -> float | None:
    """The cloud throttled a call of this bucket: shrink it for everyone, cancel any credit,
    and hold it shrunk. Once per quarter of the hold at most, so one burst of throttling
    answers across processes shrinks it once. Returns the new share, or None if unchanged."""
    now = func.statement_timestamp()  # one instant for the whole statement
    b = api_budgets.c
    statement = (
        update(api_budgets)
        .where(_is(key), or_(b.shrink_until.is_(None), b.shrink_until < now + hold * 0.75))
        .values(
            shrink=func.greatest(SHRINK_FLOOR, b.shrink * factor),
            tokens=func.least(b.tokens, 0.0),
            shrink_until=now + hold,
            updated=now,
        )
        .returning(b.shrink)
    )
    with one_statement(engine) as conn:
        return conn.execute(statement).scalar()
