"""One API budget per cloud account, shared by every process and replica through Postgres.

The clouds rate-limit per account (and region), not per process: a provisioner and two
scanners each keeping their own token bucket would together exceed the limit and be
throttled. Each (account, scope, call class) is one bucket row (wm/db/budgets.py). A call
takes its cost from it in one statement before it leaves; if the bucket is short, the call
waits out the debt, so calls leave at the bucket's pace whichever process makes them. Most
calls take no database round trip: a take may bring back a small local allowance (a few
percent of the bucket), spent by the next calls of this process, and dropped if unused for a
few seconds. A throttling answer from the cloud shrinks the bucket for everyone for a while.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from wm.calls import CallClass, Draw
from wm.config.loader import BudgetLimit
from wm.db import budgets as store
from wm.db.budgets import BucketKey
from wm.ops.telemetry import API_BUDGET_WAIT_SECONDS, log

ALLOWANCE_SHARE = 0.02  # of a bucket, taken ahead for this process's next calls
ALLOWANCE_TTL_S = 2.0  # an allowance unused this long is dropped (other processes need it)
SEND_MARGIN_S = 0.02  # after a wait: the cloud's clock may run a little behind ours
SHRINK_FACTOR = 0.5
SHRINK_HOLD = timedelta(seconds=30)


@dataclass
class _Allowance:
    tokens: float = 0.0
    taken_at: float = 0.0


@dataclass
class SharedBudget:
    """The Budget a provider's gate draws from (wm/providers/gate.py), for one account; the
    processes wire it to their providers (procs/providers.py)."""

    engine: Engine
    provider_id: str
    account: str
    limits: Mapping[CallClass, BudgetLimit]  # call class -> published or configured limit
    clock: Callable[[], float] = time.monotonic
    _known: set[BucketKey] = field(default_factory=set)  # buckets this process has sized
    _allowances: dict[BucketKey, _Allowance] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def prepare(self, scopes: Sequence[str]) -> None:
        """Make (or bring to this config) the buckets of every limited class in these scopes,
        in one statement, so that the first calls of a new process take their tokens without
        making their buckets first (the first launch of a deployment waited for that)."""
        sizes = {
            BucketKey(self.account, scope, call_class): (limit.usable_burst, limit.per_s)
            for scope in scopes
            for call_class, limit in self.limits.items()
        }
        try:
            store.ensure_buckets(self.engine, sizes)
        except SQLAlchemyError as error:
            self._unavailable(error)  # each bucket is made at its first take instead
            return
        self._known.update(sizes)

    def _unavailable(self, error: SQLAlchemyError) -> None:
        log(
            "api-budget-unavailable",
            logging.WARNING,
            provider=self.provider_id,
            error=type(error).__name__,
        )

    def take(self, draws: Sequence[Draw]) -> float:
        """Spend the draws; return how long to wait before the call may leave."""
        wanted: list[tuple[BucketKey, BudgetLimit, float]] = []
        for draw in draws:
            limit = self.limits.get(draw.call_class)
            if limit is None:
                continue  # a class this cloud does not limit
            key = BucketKey(self.account, draw.scope, draw.call_class)
            if not self._spend_allowance(key, draw.cost):
                wanted.append((key, limit, draw.cost))
        wait_s = self._take(wanted) if wanted else 0.0
        if wait_s > 0:
            API_BUDGET_WAIT_SECONDS.labels(self.provider_id).observe(wait_s)
            return wait_s + SEND_MARGIN_S
        return 0.0

    def throttled(self, draws: Sequence[Draw]) -> None:
        """The cloud throttled a call that drew these: shrink those buckets for everyone."""
        for draw in draws:
            if draw.call_class not in self.limits:
                continue
            key = BucketKey(self.account, draw.scope, draw.call_class)
            with self._lock:
                self._allowances.pop(key, None)
            try:
                share = store.shrink(self.engine, key, SHRINK_FACTOR, SHRINK_HOLD)
            except SQLAlchemyError:
                continue  # the budget is advisory: a database hiccup must not fail the call
            if share is not None:
                log(
                    "api-budget-shrunk",
                    logging.WARNING,
                    provider=self.provider_id,
                    account=self.account,
                    scope=draw.scope,
                    call_class=draw.call_class,
                    share=round(share, 3),
                    hold_s=SHRINK_HOLD.total_seconds(),
                )

    def _spend_allowance(self, key: BucketKey, cost: float) -> bool:
        with self._lock:
            allowance = self._allowances.get(key)
            if allowance is None or self.clock() - allowance.taken_at > ALLOWANCE_TTL_S:
                self._allowances.pop(key, None)
                return False
            if allowance.tokens < cost:
                return False
            allowance.tokens -= cost
            return True

    def _take(self, wanted: Sequence[tuple[BucketKey, BudgetLimit, float]]) -> float:
        """Take from the buckets the allowances did not cover, in one statement; return the
        longest wait among them."""
        wants = [
            store.Want(key, cost, max(cost, limit.burst * ALLOWANCE_SHARE))
            for key, limit, cost in wanted
        ]
        try:
            unknown = {
                k: (lim.usable_burst, lim.per_s) for k, lim, _ in wanted if k not in self._known
            }
            if unknown:
                # First use by this process: create the buckets, or bring their size and rate
                # to this process's config, so an edited limit takes effect at the next deploy.
                store.ensure_buckets(self.engine, unknown)
                self._known.update(unknown)
            taken = store.take_many(self.engine, wants)
        except SQLAlchemyError as error:
            # Advisory: without the database the gate's own per-process bucket still holds.
            self._unavailable(error)
            return 0.0
        wait_s = 0.0
        for want in wants:
            got = taken.get(want.key)
            if got is None:
                continue
            if got.granted > want.cost:
                with self._lock:
                    self._allowances[want.key] = _Allowance(got.granted - want.cost, self.clock())
            wait_s = max(wait_s, got.wait_s)
        return wait_s
