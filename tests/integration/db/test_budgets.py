"""The shared API budget on real Postgres: atomic takes, debts, refills, shrinking on throttles,
and the local allowance that spares most calls a round trip."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import event, text

from wm.calls import CallClass, Draw
from wm.config.loader import BudgetLimit, GateConfig
from wm.db import budgets as store
from wm.db.budgets import BucketKey
from wm.errors import CloudError, ErrorCategory
from wm.providers.budget import ALLOWANCE_SHARE, SharedBudget
from wm.providers.gate import Gate

KEY = BucketKey("123456789012", "us-east-1", "describe")


def bucket(engine, burst: float = 100, per_s: float = 0.001, key: BucketKey = KEY) -> BucketKey:
    store.ensure_buckets(engine, {key: (burst, per_s)})
    return key


def age(engine, seconds: float, key: BucketKey = KEY) -> None:
    """Move the bucket's last update back in time: as if `seconds` had passed."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE api_budgets SET updated = updated - make_interval(secs => :s) "
                "WHERE account = :a AND scope = :r AND call_class = :c"
            ),
            {"s": seconds, "a": key.account, "r": key.scope, "c": key.call_class},
        )


def test_a_take_gets_its_cost_and_a_small_allowance_when_the_bucket_has_plenty(engine):
    bucket(engine)

    taken = store.take(engine, KEY, cost=1, chunk=5)

    assert taken.granted == 5 and taken.tokens == pytest.approx(95, abs=0.01)
    assert taken.wait_s == 0


def test_a_short_bucket_goes_into_debt_and_the_caller_waits_it_out(engine):
    bucket(engine, burst=10, per_s=2)

    taken = store.take(engine, KEY, cost=30, chunk=30)

    assert taken.granted == 30
    assert taken.tokens == pytest.approx(-20, abs=0.01)
    assert taken.wait_s == pytest.approx(10, abs=0.02)  # 20 tokens at 2 a second


def refilled_within(started: float, per_s: float) -> float:
    """The tokens a bucket may have gained in real time since `started` (a busy machine takes
    tens of milliseconds between two statements): the slack of a refill's expected value."""
    return per_s * (time.monotonic() - started) + 0.01


def test_the_bucket_refills_by_elapsed_time_up_to_its_size(engine):
    bucket(engine, burst=10, per_s=2)
    started = time.monotonic()
    store.take(engine, KEY, cost=10, chunk=10)

    age(engine, 3)  # 6 tokens back
    tokens = store.take(engine, KEY, cost=1, chunk=1).tokens
    assert 5 - 0.01 <= tokens <= 5 + refilled_within(started, per_s=2)
    age(engine, 3600)  # never more than the bucket holds
    assert store.take(engine, KEY, cost=1, chunk=1).tokens == pytest.approx(9, abs=0.05)


def test_concurrent_takes_never_lose_an_update(engine):
    bucket(engine, burst=100, per_s=0.0001)
    threads = [
        threading.Thread(target=lambda: [store.take(engine, KEY, 1, 1) for _ in range(40)])
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    final = store.take(engine, KEY, 0, 0)
    assert final.tokens == pytest.approx(100 - 8 * 40, abs=0.1)


def test_a_throttle_shrinks_the_bucket_for_a_while_once_per_burst_then_it_recovers(engine):
    bucket(engine, burst=100, per_s=10)

    first = store.shrink(engine, KEY, 0.5, timedelta(seconds=30))
    again = store.shrink(engine, KEY, 0.5, timedelta(seconds=30))  # the same burst of 429s

    assert (first, again) == (0.5, None)
    held = store.take(engine, KEY, 0, 0)
    assert held.tokens < 0.5 and held.rate_per_s == pytest.approx(5)  # credit cancelled
    with engine.begin() as conn:  # the hold is over, and 10 s have passed since
        conn.execute(text("UPDATE api_budgets SET shrink_until = now() - interval '1 second'"))
    age(engine, 10)
    recovered = store.take(engine, KEY, 0, 0)
    assert 5 < recovered.rate_per_s <= 10


def test_a_missing_bucket_is_none_and_ensure_keeps_limits_up_to_date(engine):
    assert store.take(engine, KEY, 1, 1) is None
    bucket(engine, burst=10, per_s=1)
    started = time.monotonic()
    store.take(engine, KEY, 4, 4)
    bucket(engine, burst=50, per_s=5)  # the config changed: size and rate follow
    taken = store.take(engine, KEY, 0, 0)
    assert taken.rate_per_s == 5
    assert 6 - 0.01 <= taken.tokens <= 6 + refilled_within(started, per_s=5)


class Statements:
    def __init__(self, engine) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *args) -> None:
        self.count += 1


def shared(engine, **limits: BudgetLimit) -> SharedBudget:
    return SharedBudget(engine, "aws-a", KEY.account, limits)


def test_most_calls_spend_a_local_allowance_without_a_round_trip(engine):
    limit = BudgetLimit(burst=1000, per_s=100)
    budget = shared(engine, describe=limit)
    statements = Statements(engine)
    draw = Draw(KEY.scope, "describe")

    waits = [budget.take([draw]) for _ in range(100)]

    assert waits == [0.0] * 100
    chunk = limit.burst * ALLOWANCE_SHARE
    # The first use writes the bucket's size, once; then one take per chunk.
    assert statements.count <= 2 + 100 / chunk + 1
    # The bucket was made at the cloud's size less the jitter reserve (0.5 s at 100/s).
    assert store.take(engine, KEY, 0, 0).tokens == pytest.approx(950 - 100, abs=chunk + 1)


def test_a_process_started_with_an_edited_limit_resizes_the_shared_bucket(engine):
    shared(engine, describe=BudgetLimit(burst=100, per_s=10)).take([Draw(KEY.scope, "describe")])
    resized = shared(engine, describe=BudgetLimit(burst=40, per_s=4))

    resized.take([Draw(KEY.scope, "describe")])

    with engine.connect() as conn:
        row = conn.execute(text("SELECT burst, per_s, tokens FROM api_budgets")).one()
    assert (row.burst, row.per_s) == (38, 4)  # 40 less 0.5 s of refill at 4/s
    assert row.tokens <= 38  # what the old, bigger bucket held is capped at the new size


def test_classes_the_cloud_does_not_limit_cost_nothing(engine):
    budget = shared(engine, describe=BudgetLimit(burst=10, per_s=1))
    statements = Statements(engine)
    assert budget.take([Draw(KEY.scope, CallClass.WRITE)]) == 0.0  # limited on ARM, not here
    assert statements.count == 0


def test_a_throttled_call_shrinks_the_shared_bucket_and_says_so(engine, caplog):
    budget = shared(engine, describe=BudgetLimit(burst=100, per_s=10))
    draw = Draw(KEY.scope, "describe")
    budget.take([draw])

    with caplog.at_level(logging.WARNING, logger="wm"):
        budget.throttled([draw])

    shrunk = [r for r in caplog.records if getattr(r, "wm_event", "") == "api-budget-shrunk"]
    assert [r.wm_fields["share"] for r in shrunk] == [0.5]
    # The allowance taken before the throttle is dropped: the next call asks the bucket.
    assert budget.take([draw]) > 0


def test_the_gate_waits_out_the_budget_and_shrinks_it_on_a_throttle(engine):
    budget = shared(engine, **{"run-instances": BudgetLimit(burst=10, per_s=5)})
    slept: list[float] = []
    gate = Gate(
        "aws-a", GateConfig(max_attempts=2, backoff_base_s=0), _classify, sleep=slept.append
    )
    gate.use_budget(budget)
    spend = [Draw(KEY.scope, "run-instances", 30)]
    started = time.monotonic()

    assert gate.call("RunInstances", lambda: "ok", spend=spend) == "ok"
    # A bucket of 10 run at 7.5 (0.5 s of refill in reserve): 22.5 instances of debt at 5/s,
    # less what refilled meanwhile.
    assert slept and 4.5 - refilled_within(started, per_s=5) / 5 - 0.1 <= slept[-1] <= 4.5 + 0.1

    def throttled() -> None:
        raise CloudError("aws-a", ErrorCategory.THROTTLED, "RequestLimitExceeded", "slow down")

    with pytest.raises(CloudError):
        gate.call("RunInstances", throttled, spend=spend)
    row = store.take(engine, BucketKey(KEY.account, KEY.scope, "run-instances"), 0, 0)
    assert row.rate_per_s == pytest.approx(2.5)
    gate.close()


def _classify(exc: BaseException) -> CloudError:
    return CloudError("aws-a", ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))


def test_a_prepared_budget_has_every_bucket_and_its_first_take_is_one_statement(engine):
    limits = {
        CallClass.DESCRIBE: BudgetLimit(burst=100, per_s=10),
        CallClass.RUN_INSTANCES_CALLS: BudgetLimit(burst=5, per_s=2),
    }
    budget = SharedBudget(engine, "aws-a", KEY.account, limits)

    budget.prepare(["us-east-1", "us-west-2"])
    statements = Statements(engine)
    budget.take([Draw("us-west-2", CallClass.RUN_INSTANCES_CALLS)])

    assert statements.count == 1  # the take alone: its bucket was there
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT scope, call_class, burst FROM api_budgets")).all()
    assert sorted(rows) == [
        ("us-east-1", "describe", 95),  # the cloud's size less 0.5 s of refill
        ("us-east-1", "run-instances-calls", 4),
        ("us-west-2", "describe", 95),
        ("us-west-2", "run-instances-calls", 4),
    ]


def test_a_budget_that_cannot_be_prepared_makes_its_buckets_at_first_use(engine, caplog):
    budget = shared(engine, describe=BudgetLimit(burst=100, per_s=10))
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE api_budgets RENAME TO api_budgets_away"))
    try:
        with caplog.at_level(logging.WARNING):
            budget.prepare([KEY.scope])  # logged, not raised: the budget is advisory
    finally:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE api_budgets_away RENAME TO api_budgets"))

    assert "api-budget-unavailable" in caplog.text
    budget.take([Draw(KEY.scope, "describe")])
    assert store.take(engine, KEY, 0, 0) is not None


def test_a_call_drawing_from_two_buckets_takes_from_both_in_one_statement(engine):
    limits = {
        CallClass.RUN_INSTANCES_CALLS: BudgetLimit(burst=5, per_s=2),
        CallClass.RUN_INSTANCES: BudgetLimit(burst=1000, per_s=2),
    }
    budget = SharedBudget(engine, "aws-a", KEY.account, limits)
    budget.prepare([KEY.scope])
    statements = Statements(engine)
    started = time.monotonic()

    budget.take(
        [
            Draw(KEY.scope, CallClass.RUN_INSTANCES_CALLS),
            Draw(KEY.scope, CallClass.RUN_INSTANCES, cost=30),
        ]
    )

    assert statements.count == 1
    calls = store.take(engine, BucketKey(KEY.account, KEY.scope, "run-instances-calls"), 0, 0)
    instances = store.take(engine, BucketKey(KEY.account, KEY.scope, "run-instances"), 0, 0)
    slack = refilled_within(started, per_s=2)
    assert 4 - 1 - 0.01 <= calls.tokens <= 4 - 1 + slack
    assert 999 - 30 - 0.01 <= instances.tokens <= 999 - 30 + slack


def test_takes_of_the_same_buckets_in_either_order_at_once_never_deadlock(engine):
    # Full buckets: a take that waited for a row's lock started before the take that held it,
    # and must not count that as time running backwards (it shrank a full bucket).
    a = BucketKey(KEY.account, "us-east-1", "describe")
    b = BucketKey(KEY.account, "us-east-1", "run-instances")
    started = time.monotonic()
    store.ensure_buckets(engine, {a: (1e6, 1.0), b: (1e6, 1.0)})
    failures: list[BaseException] = []

    def take(order: list[BucketKey]) -> None:
        try:
            for _ in range(50):
                store.take_many(engine, [store.Want(k, 1, 1) for k in order])
        except BaseException as error:  # a deadlock is raised by Postgres in one of them
            failures.append(error)

    threads = [threading.Thread(target=take, args=([a, b] if n % 2 else [b, a],)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    for key in (a, b):
        # Never less than 300 taken from full (no shrinking); more only as refilled since.
        tokens = store.take(engine, key, 0, 0).tokens
        assert 1e6 - 300 - 0.01 <= tokens <= 1e6 - 300 + refilled_within(started, per_s=1.0)
