"""The shared API budgets' statements: each take and each shrink is one atomic statement.

A bucket refills by elapsed time (the database's clock) at `per_s * shrink` up to
`burst * shrink`. A take always gets at least what it asked for, going into debt if the bucket
is short (the caller waits the debt out before calling the cloud, so the calls leave at the
bucket's pace), and up to `chunk` when the bucket has plenty: the extra is a small local
allowance that spares the next calls a round trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import (
    Engine,
    Float,
    Text,
    and_,
    bindparam,
    case,
    cast,
    column,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert

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
    """Take tokens from some buckets of one account, as one statement with the buckets and
    amounts as array parameters: built once, since building it costs more than running it (a
    take precedes every call), and one statement for a call that draws from two buckets
    (EC2's RunInstances: its request and its resource buckets). The rows are locked in key
    order, so two takes of the same buckets wait for each other instead of deadlocking."""
    now = func.statement_timestamp()  # one instant for the whole statement
    b = api_budgets.c
    wanted = (
        func.unnest(
            bindparam("b_scopes", type_=ARRAY(Text)),
            bindparam("b_classes", type_=ARRAY(Text)),
            bindparam("b_costs", type_=ARRAY(Float)),
            bindparam("b_chunks", type_=ARRAY(Float)),
        )
        .table_valued(
            column("scope", Text),
            column("call_class", Text),
            column("cost", Float),
            column("chunk", Float),
        )
        .render_derived(name="wanted")
    )
    # Never negative: a take that waited for a row's lock may have started before the take that
    # held it (and stamped the row later): a negative time would shrink a full bucket. Nor does
    # such a take move the stamp back: the next take would refill the time between twice.
    elapsed = func.greatest(0.0, cast(func.extract("epoch", now - b.updated), Float))
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
            wanted.c.cost,
            wanted.c.chunk,
            recovered.label("shrink"),
            func.least(b.burst * recovered, b.tokens + elapsed * b.per_s * recovered).label(
                "refilled"
            ),
        )
        .join_from(
            api_budgets,
            wanted,
            and_(b.scope == wanted.c.scope, b.call_class == wanted.c.call_class),
        )
        .where(b.account == bindparam("b_account"))
        .order_by(b.scope, b.call_class)
        .with_for_update(of=api_budgets)
        .cte("current")
    )
    granted = func.greatest(current.c.cost, func.least(current.c.chunk, current.c.refilled))
    return (
        update(api_budgets)
        .where(
            b.account == current.c.account,
            b.scope == current.c.scope,
            b.call_class == current.c.call_class,
        )
        .values(
            shrink=current.c.shrink,
            tokens=current.c.refilled - granted,
            updated=func.greatest(b.updated, now),
        )
        .returning(
            b.scope,
            b.call_class,
            granted.label("granted"),
            b.tokens,
            (b.per_s * b.shrink).label("rate"),
        )
    )


_TAKE = _take_statement()


@dataclass(frozen=True)
class Want:
    """What a take asks of one bucket: `cost` tokens, and up to `chunk` if it has them."""

    key: BucketKey
    cost: float
    chunk: float


def take_many(engine: Engine, wants: Sequence[Want]) -> dict[BucketKey, Taken]:
    """Take from every bucket wanted (all of one account), in one statement; a bucket that
    does not exist is left out of the answer."""
    if not wants:
        return {}
    account = wants[0].key.account
    assert all(w.key.account == account for w in wants), "one account a take"
    params = {
        "b_account": account,
        "b_scopes": [w.key.scope for w in wants],
        "b_classes": [w.key.call_class for w in wants],
        "b_costs": [float(w.cost) for w in wants],
        "b_chunks": [float(w.chunk) for w in wants],
    }
    with one_statement(engine) as conn:  # atomic alone: no BEGIN and COMMIT round trips
        rows = conn.execute(_TAKE, params).all()
    return {
        BucketKey(account, row.scope, row.call_class): Taken(row.granted, row.tokens, row.rate)
        for row in rows
    }


def take(engine: Engine, key: BucketKey, cost: float, chunk: float) -> Taken | None:
    """Take `cost` tokens (and up to `chunk` if the bucket has them); None: no such bucket."""
    return take_many(engine, [Want(key, cost, chunk)]).get(key)


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
            updated=func.greatest(b.updated, now),  # never back (as a take's stamp)
        )
        .returning(b.shrink)
    )
    with one_statement(engine) as conn:
        return conn.execute(statement).scalar()
