"""The cloud API gate, driven by a fake clock: retries, backoff, pauses, timeouts, limits."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from wm.calls import ACCOUNT_WIDE, CallClass, Draw
from wm.config.loader import BudgetLimit, GateConfig
from wm.errors import CloudError, ErrorCategory, UnclassedOperation
from wm.providers.gate import Gate, TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Boom(Exception):
    def __init__(self, category: ErrorCategory, retry_after_s: float | None = None) -> None:
        self.category = category
        self.retry_after_s = retry_after_s


def classify(exc: BaseException) -> CloudError:
    assert isinstance(exc, Boom)
    return CloudError("p", exc.category, exc.category.name, "boom", retry_after_s=exc.retry_after_s)


def make_gate(clock: FakeClock, classes=None, **limits) -> Gate:
    config = GateConfig(
        **{"backoff_base_s": 1.0, "max_attempts": 4, "pause_after_failures": 100, **limits}
    )
    return Gate(
        "p", config, classify, sleep=clock.sleep, clock=clock, rng=lambda: 0.5, classes=classes
    )


class RecordingBudget:
    """A shared budget that has plenty and remembers what each call drew."""

    def __init__(self) -> None:
        self.taken: list[tuple[Draw, ...]] = []

    def take(self, draws) -> float:
        self.taken.append(tuple(draws))
        return 0.0

    def throttled(self, draws) -> None:
        pass


def failing(times: int, category: ErrorCategory, retry_after_s: float | None = None):
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise Boom(category, retry_after_s)
        return "ok"

    return fn, calls


def test_throttling_is_retried_with_full_jitter_backoff_until_it_succeeds():
    clock = FakeClock()
    fn, calls = failing(2, ErrorCategory.THROTTLED)
    assert make_gate(clock).call("list", fn) == "ok"
    assert calls["n"] == 3
    assert clock.slept == [0.5, 1.0]  # uniform(0, base * 2**n) with the draw fixed at 0.5


def test_retry_after_is_honoured_as_a_floor():
    clock = FakeClock()
    fn, _ = failing(1, ErrorCategory.THROTTLED, retry_after_s=7.0)
    make_gate(clock).call("list", fn)
    assert clock.slept == [7.0]


def test_non_retryable_errors_are_raised_at_once():
    clock = FakeClock()
    fn, calls = failing(5, ErrorCategory.QUOTA)
    with pytest.raises(CloudError) as caught:
        make_gate(clock).call("create", fn)
    assert (caught.value.category, caught.value.operation, calls["n"]) == (
        ErrorCategory.QUOTA,
        "create",
        1,
    )


def test_attempts_are_bounded():
    clock = FakeClock()
    fn, calls = failing(10, ErrorCategory.TRANSIENT)
    with pytest.raises(CloudError):
        make_gate(clock, max_attempts=3).call("get", fn)
    assert calls["n"] == 3


def test_repeated_failures_pause_the_provider_then_it_resumes(caplog):
    clock = FakeClock()
    gate = make_gate(clock, pause_after_failures=3, pause_s=60, max_attempts=1)
    fn, calls = failing(3, ErrorCategory.TRANSIENT)
    with caplog.at_level(logging.INFO, logger="wm"):
        for _ in range(3):
            with pytest.raises(CloudError):
                gate.call("get", fn)
        with pytest.raises(CloudError) as paused:
            gate.call("get", fn)
        assert paused.value.category == ErrorCategory.PAUSED and calls["n"] == 3  # no call made
        clock.now += 61
        assert gate.call("get", fn) == "ok"
    events = [r.wm_event for r in caplog.records]
    assert events == ["cloud-api-paused", "cloud-api-resumed"]


def test_a_call_that_never_answers_times_out_as_transient():
    gate = Gate("p", GateConfig(timeout_s=0.2, max_attempts=1), classify)
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(CloudError) as caught:
        gate.call("get", release.wait, 30)
    release.set()
    assert caught.value.category == ErrorCategory.TRANSIENT and caught.value.code == "Timeout"
    assert time.monotonic() - started < 10  # far below the 30 s call, on a busy machine too
    gate.close()


def test_concurrency_is_bounded():
    gate = Gate("p", GateConfig(concurrency=2, calls_per_s=1000, burst=1000), classify)
    lock, in_flight, peak = threading.Lock(), [0], [0]

    def work() -> None:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1

    threads = [threading.Thread(target=gate.call, args=("op", work)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 2
    gate.close()


def test_token_bucket_spends_its_burst_then_makes_callers_wait():
    clock = FakeClock()
    bucket = TokenBucket(rate_per_s=2.0, burst=3, clock=clock)
    waits = [bucket.take("op") for _ in range(5)]
    assert waits == [0.0, 0.0, 0.0, 0.5, 1.0]
    clock.now += 10
    assert bucket.take("op") == 0.0


# -- this process's own pace: the cloud's published limits per call class, or a set cap ---------

EC2_LIKE = {
    CallClass.RUN_INSTANCES_CALLS: BudgetLimit(burst=2, per_s=2),
    CallClass.RUN_INSTANCES: BudgetLimit(burst=100, per_s=10),
    CallClass.DESCRIBE: BudgetLimit(burst=1, per_s=1),
}
TABLE = {
    "RunInstances": (CallClass.RUN_INSTANCES_CALLS,),
    "DescribeInstances": (CallClass.DESCRIBE,),
}


def paced_gate(clock: FakeClock, **config) -> Gate:
    return Gate(
        "p",
        GateConfig(**config),
        classify,
        sleep=clock.sleep,
        clock=clock,
        classes=TABLE,
        limits=EC2_LIKE,
    )


def test_by_default_each_call_class_is_paced_by_its_own_published_bucket():
    clock = FakeClock()
    gate = paced_gate(clock)
    for _ in range(3):  # RunInstances' request bucket holds 2, refilled at 2 a second
        gate.call("RunInstances", lambda: "ok")
    assert clock.slept == [0.5]
    gate.call("DescribeInstances", lambda: "ok")  # another class: its own bucket is full
    assert clock.slept == [0.5]


def test_a_bucket_counting_instances_is_spent_by_the_instances_a_call_asks_for():
    clock = FakeClock()
    gate = paced_gate(clock)
    spend = (Draw("r", CallClass.RUN_INSTANCES_CALLS), Draw("r", CallClass.RUN_INSTANCES, 100))
    gate.call("RunInstances", lambda: "ok", spend=spend)
    gate.call("RunInstances", lambda: "ok", spend=spend)  # 100 instances short: 10 s at 10/s
    assert clock.slept == [10.0]


def test_buckets_are_kept_per_region_as_the_cloud_keeps_them():
    clock = FakeClock()
    gate = paced_gate(clock)
    for region in ("us-east-1", "eu-west-1"):
        gate.call("DescribeInstances", lambda: "ok", spend=(Draw(region, CallClass.DESCRIBE),))
    assert clock.slept == []


def test_a_configured_cap_paces_every_call_in_place_of_the_class_buckets():
    clock = FakeClock()
    gate = paced_gate(clock, calls_per_s=1.0, burst=5)
    for _ in range(5):  # past RunInstances' 2, within the cap's 5
        gate.call("RunInstances", lambda: "ok")
    assert clock.slept == []
    gate.call("DescribeInstances", lambda: "ok")
    assert clock.slept == [1.0]


def test_a_cap_without_a_burst_holds_two_seconds_of_calls():
    assert GateConfig(calls_per_s=20).cap == (20, 40)
    assert GateConfig().cap is None


def test_a_burst_without_a_rate_is_refused_by_name():
    with pytest.raises(ValueError, match="burst: set calls_per_s too"):
        GateConfig(burst=40)


def test_attempts_are_counted_per_operation():
    clock = FakeClock()
    gate = make_gate(clock)
    fn, _ = failing(1, ErrorCategory.TRANSIENT)
    gate.call("list", fn)
    gate.call("get", lambda: 1)
    assert dict(gate.attempts) == {"list": 2, "get": 1}


def test_a_listed_operation_draws_its_classes_account_wide_from_the_budget():
    gate = make_gate(FakeClock(), classes={"list": (CallClass.READ,)})
    budget = RecordingBudget()
    gate.use_budget(budget)

    assert gate.call("list", lambda: "ok") == "ok"

    assert budget.taken == [(Draw(ACCOUNT_WIDE, CallClass.READ),)]
    gate.close()


@pytest.mark.parametrize("spend", [None, (Draw("eu-west-1", CallClass.DESCRIBE),)])
def test_an_operation_missing_from_the_table_is_refused_before_anything_is_sent(spend):
    # A typo, or a new call nobody classed: it would draw from no bucket of the shared budget.
    gate = make_gate(FakeClock(), classes={"list": (CallClass.READ,)})
    budget = RecordingBudget()
    gate.use_budget(budget)
    sent = []

    with pytest.raises(UnclassedOperation, match=r"'lsit'.*CALL_CLASSES"):
        gate.call("lsit", lambda: sent.append("sent"), spend=spend)

    assert (sent, budget.taken, dict(gate.attempts)) == ([], [], {})
    gate.close()


def test_a_gate_built_without_a_table_calls_any_operation():
    gate = make_gate(FakeClock())
    assert gate.call("anything", lambda: "ok") == "ok"
    gate.close()


def test_a_call_waiting_for_its_turn_is_not_sent_once_the_process_stops():
    clock = FakeClock()
    gate = make_gate(clock, calls_per_s=1.0, burst=1)
    stop = threading.Event()
    gate.stop_on(stop)
    sent = []
    gate.call("create", lambda: sent.append("first"))
    stop.set()

    with pytest.raises(CloudError) as refused:
        gate.call("create", lambda: sent.append("second"))  # would wait 1 s for the bucket

    assert refused.value.category is ErrorCategory.PAUSED
    assert refused.value.code == "ShuttingDown"
    assert sent == ["first"]
    gate.close()


def test_a_backoff_is_cut_short_when_the_process_stops():
    clock = FakeClock()
    gate = make_gate(clock)
    stop = threading.Event()
    gate.stop_on(stop)
    fn, calls = failing(1, ErrorCategory.TRANSIENT)
    stop.set()

    with pytest.raises(CloudError) as refused:
        gate.call("list", fn)

    assert refused.value.code == "ShuttingDown"
    assert calls["n"] == 1  # the failed attempt is not retried
    gate.close()


@pytest.mark.parametrize(
    ("scenario", "fates", "applied"),
    [
        ("a throttle answer: the cloud did nothing", [ErrorCategory.THROTTLED] * 4, False),
        ("a refusal: nothing done", [ErrorCategory.QUOTA], False),
        ("a 5xx may have been carried out", [ErrorCategory.TRANSIENT] * 4, True),
        (
            "a 5xx, then throttled: the first may stand",
            [ErrorCategory.TRANSIENT] + [ErrorCategory.THROTTLED] * 3,
            True,
        ),
        ("a 5xx, then a quota refusal", [ErrorCategory.TRANSIENT, ErrorCategory.QUOTA], True),
    ],
)
def test_an_error_says_whether_an_attempt_may_have_been_carried_out(scenario, fates, applied):
    clock = FakeClock()
    gate = make_gate(clock)
    remaining = list(fates)

    def fn() -> str:
        raise Boom(remaining.pop(0))

    with pytest.raises(CloudError) as caught:
        gate.call("create", fn)
    assert caught.value.maybe_applied is applied, scenario
    assert caught.value.nothing_applied is not applied, scenario


def test_a_refusal_as_paused_after_an_unanswered_attempt_may_still_have_made_something():
    clock = FakeClock()
    # Every failure pauses the provider: the second attempt is refused without being sent.
    gate = make_gate(clock, pause_after_failures=1, pause_s=60.0)
    fn, calls = failing(10, ErrorCategory.TRANSIENT)
    with pytest.raises(CloudError) as caught:
        gate.call("create", fn)
    assert calls["n"] == 1
    assert caught.value.category is ErrorCategory.PAUSED
    assert caught.value.maybe_applied and not caught.value.nothing_applied
    # A call that was never sent at all made nothing.
    with pytest.raises(CloudError) as refused:
        gate.call("create", fn)
    assert refused.value.category is ErrorCategory.PAUSED and refused.value.nothing_applied


def test_a_stopping_process_refuses_the_retry_but_remembers_the_lost_answer():
    clock = FakeClock()
    stop = threading.Event()
    gate = make_gate(clock)
    gate.stop_on(stop)

    def fn() -> str:
        stop.set()  # SIGTERM arrives while the first attempt is out
        raise Boom(ErrorCategory.TRANSIENT)

    with pytest.raises(CloudError) as caught:
        gate.call("create", fn)
    assert caught.value.code == "ShuttingDown" and caught.value.maybe_applied


def test_the_longest_call_is_every_attempt_timing_out_with_the_longest_backoffs():
    gate = make_gate(
        FakeClock(), timeout_s=10.0, max_attempts=4, backoff_base_s=1.0, backoff_max_s=3.0
    )
    assert gate.longest_call_s() == 4 * 10.0 + (1.0 + 2.0 + 3.0)


# -- background calls: the launch choice's signal reads, the gate's lowest priority -----------


class BusyBudget(RecordingBudget):
    """A shared budget whose buckets are spoken for: every take must wait."""

    def take(self, draws) -> float:
        super().take(draws)
        return 0.5


def test_a_background_call_is_not_sent_when_the_budget_would_make_it_wait():
    clock = FakeClock()
    gate = make_gate(clock, classes={"Read": (CallClass.READ,)})
    gate.use_budget(BusyBudget())
    sent = []

    with pytest.raises(CloudError) as refused:
        gate.call("Read", lambda: sent.append(1), background=True)

    assert refused.value.code == "Deferred"
    assert sent == [] and clock.slept == []  # neither sent nor waited for
    # A foreground call waits its turn, as ever.
    gate.call("Read", lambda: sent.append(1))
    assert sent == [1] and clock.slept == [0.5]


def test_a_failing_background_call_is_tried_once_and_never_pauses_the_provider():
    clock = FakeClock()
    gate = make_gate(clock, pause_after_failures=1)
    calls = []

    def fail():
        calls.append(1)
        raise Boom(ErrorCategory.TRANSIENT)

    with pytest.raises(CloudError):
        gate.call("Read", fail, background=True)

    assert calls == [1]
    assert not gate.paused
    with pytest.raises(CloudError):
        gate.call("Read", fail)
    assert gate.paused  # the same failure in the foreground pauses, as ever


def test_a_background_call_is_refused_while_the_provider_is_paused():
    clock = FakeClock()
    gate = make_gate(clock, pause_after_failures=1, max_attempts=1)
    with pytest.raises(CloudError):
        gate.call("Write", lambda: (_ for _ in ()).throw(Boom(ErrorCategory.TRANSIENT)))
    sent = []

    with pytest.raises(CloudError) as refused:
        gate.call("Read", lambda: sent.append(1), background=True)

    assert refused.value.category is ErrorCategory.PAUSED
    assert sent == []
