"""The cloud API gate: every SDK call of a provider goes through one.

It bounds each call in time and the calls in flight, spends tokens from rate limits (this
process's own buckets: by default one per call class at the cloud's published limit; and the
account's shared budget across processes, when the process has a database), retries
throttling and server errors with full-jitter backoff (honouring a cloud's Retry-After), and
pauses the whole provider when the cloud keeps failing, so a sick cloud sees no traffic for a
while instead of a retry storm. SDK-level retries are off (each provider module builds its
clients that way): the gate is the only retry policy.

Exceptions are translated once, by the provider's `classify`, into `CloudError`; messages are
the cloud's own error text, which carries no credentials.

Background calls (`background=True`: the launch choice's signal reads) are the gate's lowest
priority: sent only when neither this process's bucket nor the shared budget makes them wait
(else refused as `Deferred`, the bucket's turn left to creates and scans), tried once, and
their failures never pause the provider: a signal source that is down or slow must not stop
the calls that launch and scan.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Protocol, TypeVar

from wm.calls import ACCOUNT_WIDE, CallClass, Draw
from wm.config.base import ProviderConfigBase
from wm.config.loader import BudgetLimit, GateConfig
from wm.errors import SHUTTING_DOWN, CloudError, ErrorCategory, UnclassedOperation
from wm.ops.telemetry import CLOUD_API_CALLS, CLOUD_API_PAUSED, CLOUD_API_SECONDS, log
from wm.providers.meter import count_call

DEFERRED = "Deferred"  # a background call not sent: the budget had no spare turn for it

T = TypeVar("T")
# Threads beyond `concurrency` so that calls abandoned at their timeout (still blocked in the
# SDK until its own socket timeout) do not starve new calls.
SPARE_THREADS = 8


class RateLimiter(Protocol):
    def take(self, operation: str, draws: Sequence[Draw]) -> float:
        """Spend what one call of `operation` draws; return the seconds to wait before it may
        go."""
        ...


class TokenBucket:
    """A local token bucket: `burst` tokens, refilled at `rate_per_s`."""

    def __init__(
        self, rate_per_s: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = rate_per_s
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._stamp = clock()
        self._lock = threading.Lock()

    def spend(self, cost: float = 1.0) -> float:
        """Spend `cost` tokens; return the seconds to wait before they are there."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            self._tokens -= cost
            # A negative balance is a debt: this caller waits for it to be repaid.
            return 0.0 if self._tokens >= 0 else -self._tokens / self._rate

    def take(self, operation: str, draws: Sequence[Draw] = ()) -> float:
        """One token a call, whatever it is (the configured `calls_per_s` cap)."""
        return self.spend()


class ClassBuckets:
    """This process's own buckets at the cloud's limits: one per (scope, call class) drawn,
    each spent by the call's cost (EC2's resource buckets count instances). Without a shared
    budget (no database, or `shared_budget = false`) these are all that paces the calls; with
    one they are never the tighter, as the shared buckets run a little below the same limits."""

    def __init__(
        self, limits: Mapping[CallClass, BudgetLimit], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._limits = dict(limits)
        self._clock = clock
        self._buckets: dict[tuple[str, CallClass], TokenBucket] = {}
        self._lock = threading.Lock()

    def take(self, operation: str, draws: Sequence[Draw]) -> float:
        wait_s = 0.0
        for draw in draws:
            limit = self._limits.get(draw.call_class)
            if limit is None:
                continue  # a class this cloud does not limit
            key = (draw.scope, draw.call_class)
            with self._lock:
                bucket = self._buckets.get(key)
                if bucket is None:
                    bucket = self._buckets[key] = TokenBucket(limit.per_s, limit.burst, self._clock)
            wait_s = max(wait_s, bucket.spend(draw.cost))
        return wait_s


Classifier = Callable[[BaseException], CloudError]


class Budget(Protocol):
    """An API budget shared by every process that calls the same cloud account
    (wm/providers/budget.py)."""

    def take(self, draws: Sequence[Draw]) -> float:
        """Spend the draws; return the seconds to wait before the call may leave."""
        ...

    def throttled(self, draws: Sequence[Draw]) -> None:
        """The cloud throttled a call that drew these: shrink their buckets for a while."""
        ...


class Gate:
    def __init__(
        self,
        provider_id: str,
        config: GateConfig,
        classify: Classifier,
        *,
        limiter: RateLimiter | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
        classes: Mapping[str, Sequence[CallClass]] | None = None,
        limits: Mapping[CallClass, BudgetLimit] | None = None,
    ) -> None:
        self.provider_id = provider_id
        # operation -> the call classes it draws from, account-wide (a call's `spend` may say
        # otherwise). A gate with a table refuses any operation missing from it; only a gate
        # built without one (a test's) calls anything. No budget until `use_budget`.
        self._classes = classes
        self.budget: Budget | None = None
        self.config = config
        self._classify = classify
        # This process's pace: the configured cap for every call, else the cloud's published
        # limits (`limits`, the provider's budget_limits()) class by class.
        cap = config.cap
        self._limiter: RateLimiter = limiter or (
            TokenBucket(*cap, clock) if cap else ClassBuckets(limits or {}, clock)
        )
        self._sleep = sleep
        self._clock = clock
        self._rng = rng
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._pool = ThreadPoolExecutor(
            config.concurrency + SPARE_THREADS, thread_name_prefix=f"gate-{provider_id}"
        )
        self._lock = threading.Lock()
        self._failures = 0  # consecutive retryable failures, across all callers
        self._paused_until = 0.0
        self._pause_reason = ""
        self._was_paused = False
        self.attempts: Counter[str] = Counter()  # operation -> SDK calls made
        self._stop: threading.Event | None = None

    @property
    def paused(self) -> bool:
        return self._clock() < self._paused_until

    def stop_on(self, stop: threading.Event) -> None:
        """Once `stop` is set, a call waiting for its turn (the rate limit, the budget, a
        backoff) is not sent: a stopping process must not launch for seconds after SIGTERM."""
        self._stop = stop

    def use_budget(self, budget: Budget) -> None:
        """Draw every call from this shared budget too (the per-process bucket still holds)."""
        self.budget = budget

    def call(
        self,
        operation: str,
        fn: Callable[..., T],
        /,
        *args: object,
        spend: Sequence[Draw] | None = None,
        background: bool = False,
        **kwargs: object,
    ) -> T:
        """Run one SDK call under the gate's limits; raise CloudError when it finally fails.

        `spend` is what the call costs from the account's shared budget; by default one of each
        class its operation draws from, account-wide. An operation missing from the gate's
        table raises UnclassedOperation before anything is sent. `background`: the lowest
        priority (see the module's docstring).
        """
        if self._classes is not None and operation not in self._classes:
            raise UnclassedOperation(self.provider_id, operation)
        if spend is None:
            spend = tuple(Draw(ACCOUNT_WIDE, c) for c in (self._classes or {}).get(operation, ()))
        if background:
            self._refuse_if_paused(operation)
            return self._attempt(operation, fn, args, kwargs, spend, background=True)
        attempt = 0
        maybe_applied = False  # an earlier attempt may have been carried out
        while True:
            attempt += 1
            try:
                self._refuse_if_paused(operation)
                return self._attempt(operation, fn, args, kwargs, spend)
            except CloudError as error:
                maybe_applied = maybe_applied or error.maybe_applied
                error.maybe_applied = maybe_applied
                if error.category is ErrorCategory.THROTTLED and self.budget and spend:
                    self.budget.throttled(spend)
                if not error.retryable or attempt >= self.config.max_attempts:
                    raise
                backoff_s = self._backoff_s(attempt, error)
            try:
                self._wait(operation, backoff_s)
            except CloudError as stopping:
                stopping.maybe_applied = maybe_applied
                raise

    def longest_call_s(self) -> float:
        """The longest one `call` can last once its first attempt is sent: every attempt
        timing out, with the longest backoff between them. A create sent less than this ago
        may still be on its way to the cloud, or its answer on its way back."""
        backoffs = sum(self._backoff_ceiling_s(a) for a in range(1, self.config.max_attempts))
        return self.config.max_attempts * self.config.timeout_s + backoffs

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _attempt(
        self,
        operation: str,
        fn: Callable[..., T],
        args: tuple,
        kwargs: dict,
        spend: Sequence[Draw] = (),
        *,
        background: bool = False,
    ) -> T:
        wait_s = self._limiter.take(operation, spend)
        if self.budget is not None and spend:
            wait_s = max(wait_s, self.budget.take(spend))
        if wait_s > 0 and background:
            # The tokens taken are a debt of at most one call; waiting it out would hold a
            # create or a scan behind a signal read.
            raise CloudError(
                self.provider_id,
                ErrorCategory.THROTTLED,
                DEFERRED,
                f"not sent: the API budget is busy for {wait_s:.2f}s",
                operation=operation,
            )
        if wait_s > 0:
            self._wait(operation, wait_s)
        with self._slots:
            self._refuse_if_paused(operation)
            self.attempts[operation] += 1
            count_call(operation)  # for the caller's own figures (a scan's report)
            started = self._clock()
            future = self._pool.submit(fn, *args, **kwargs)
            try:
                result = future.result(timeout=self.config.timeout_s)
            except FutureTimeout:
                future.cancel()
                error = CloudError(
                    self.provider_id,
                    ErrorCategory.TRANSIENT,
                    "Timeout",
                    f"no answer within {self.config.timeout_s:g}s",
                    operation=operation,
                    maybe_applied=True,
                )
                self._record_failure(operation, error, started, pausing=not background)
                raise error from None
            except CloudError as error:
                _sent(error)
                self._record_failure(operation, error, started, pausing=not background)
                raise
            except Exception as exc:
                error = _sent(self._classify(exc))
                error.operation = error.operation or operation
                self._record_failure(operation, error, started, pausing=not background)
                raise error from exc
            self._record_success(operation, started, resuming=not background)
            return result

    def _wait(self, operation: str, seconds: float) -> None:
        if self._stop is None:
            self._sleep(seconds)
        elif self._stop.wait(seconds):
            raise CloudError(
                self.provider_id,
                ErrorCategory.PAUSED,
                SHUTTING_DOWN,
                "not sent: the process is stopping",
                operation=operation,
            )

    def _backoff_ceiling_s(self, attempt: int) -> float:
        """The longest full-jitter backoff after the given (failed) attempt."""
        return min(self.config.backoff_max_s, self.config.backoff_base_s * 2 ** (attempt - 1))

    def _backoff_s(self, attempt: int, error: CloudError) -> float:
        jitter = self._rng() * self._backoff_ceiling_s(attempt)
        return max(jitter, error.retry_after_s or 0.0)

    def _refuse_if_paused(self, operation: str) -> None:
        if self.paused:
            raise CloudError(
                self.provider_id,
                ErrorCategory.PAUSED,
                "Paused",
                f"calls paused after repeated failures ({self._pause_reason})",
                operation=operation,
            )

    def _record_success(self, operation: str, started: float, *, resuming: bool = True) -> None:
        CLOUD_API_SECONDS.labels(self.provider_id, operation).observe(self._clock() - started)
        CLOUD_API_CALLS.labels(self.provider_id, operation, "ok").inc()
        if not resuming:  # a signal source answering says nothing of the launch APIs
            return
        with self._lock:
            self._failures = 0
            resumed, self._was_paused = self._was_paused, False
        if resumed:
            CLOUD_API_PAUSED.labels(self.provider_id).set(0)
            log("cloud-api-resumed", provider=self.provider_id, operation=operation)

    def _record_failure(
        self, operation: str, error: CloudError, started: float, *, pausing: bool = True
    ) -> None:
        CLOUD_API_SECONDS.labels(self.provider_id, operation).observe(self._clock() - started)
        CLOUD_API_CALLS.labels(self.provider_id, operation, str(error.category)).inc()
        if not error.retryable or not pausing:
            return
        with self._lock:
            self._failures += 1
            # A pause asked for by the cloud (Retry-After) is honoured for every caller at once.
            pause_s = 0.0
            if self._failures >= self.config.pause_after_failures:
                pause_s = self.config.pause_s
            if error.retry_after_s:
                pause_s = max(pause_s, error.retry_after_s)
            if pause_s <= 0 or self._clock() + pause_s <= self._paused_until:
                return
            first = not self._was_paused
            self._paused_until = self._clock() + pause_s
            self._pause_reason = f"{error.category} {error.code}"
            self._was_paused = True
            self._failures = 0
        CLOUD_API_PAUSED.labels(self.provider_id).set(1)
        if first:
            log(
                "cloud-api-paused",
                logging.WARNING,
                provider=self.provider_id,
                operation=operation,
                reason=self._pause_reason,
                pause_s=round(pause_s, 3),
            )


def provider_gate(
    config: ProviderConfigBase,
    classify: Callable[[str, BaseException], CloudError],
    classes: Mapping[str, Sequence[CallClass]],
) -> Gate:
    """The gate of one provider's calls: its operations' call classes, paced at the provider's
    limits (its kind's published ones, with its `budgets`)."""
    return Gate(
        config.id,
        config.gate,
        partial(classify, config.id),
        classes=classes,
        limits=config.budget_limits(),
    )


def _sent(error: CloudError) -> CloudError:
    """An error the cloud's side of a sent request produced: a transient one (5xx, reset)
    leaves open whether the cloud carried the request out."""
    if error.category is ErrorCategory.TRANSIENT:
        error.maybe_applied = True
    return error
