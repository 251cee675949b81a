"""A pass's creates while they are out: sent in batches, each answer kept, and the one wait
that ends either when they have all answered or when news of new demand comes (pass_news.py).

The pass decides what to do with news (plan again, send more); this only sends and waits, so
the pass reads as its steps and no planning runs from in here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

from wm.providers.base import LaunchBatch, LaunchResult
from wm.provisioning.pass_news import PassNews

# Batches of one pass in flight at once. The gate bounds the calls (its concurrency, the
# cloud's buckets); this only has to keep a burst's batches from queueing behind one another.
CREATE_CONCURRENCY = 8
# Between two plannings of a pass whose creates are in flight: a stream of news (a NOTIFY per
# submission) costs at most one planning's statements this often.
LATE_ROUND_MIN_GAP_S = 0.05


class CreatesInFlight:
    """Send batches with `send`; `news_while_out` waits; `results` once it is False."""

    def __init__(
        self,
        create: Callable[[LaunchBatch], list[LaunchResult]],
        news: PassNews,
        changed: threading.Event,
        pool: ThreadPoolExecutor,
    ) -> None:
        self._create = create
        self._news = news
        self._changed = changed  # set at each news and at each answer
        self._pool = pool
        self._futures: list[Future[list[LaunchResult]]] = []
        self._planned_at = time.monotonic()

    def send(self, batches: Sequence[LaunchBatch]) -> None:
        """Send `batches` beside those out; what follows them was planned now."""
        self._planned_at = time.monotonic()
        for batch in batches:
            future = self._pool.submit(self._create, batch)
            future.add_done_callback(lambda _: self._changed.set())
            self._futures.append(future)

    def news_while_out(self, stopped: threading.Event) -> bool:
        """Wait until every create has answered (False) or news came while some are still out
        (True: the news is taken, the caller plans for it), at most one True every
        LATE_ROUND_MIN_GAP_S. A stopping process hears no news."""
        while not self._all_answered():
            since = time.monotonic() - self._planned_at
            if since < LATE_ROUND_MIN_GAP_S:
                self._changed.wait(LATE_ROUND_MIN_GAP_S - since)
            elif not stopped.is_set() and self._news.take():
                self._planned_at = time.monotonic()
                return True
            else:
                self._changed.wait()
            self._changed.clear()  # what set it is looked at again at the loop's top
        return False

    def results(self) -> dict[str, LaunchResult]:
        """Every create's result by worker id (every future has ended)."""
        return {r.worker_id: r for f in self._futures for r in f.result()}

    def _all_answered(self) -> bool:
        return all(f.done() for f in self._futures)


@contextmanager
def creates_in_flight(
    create: Callable[[LaunchBatch], list[LaunchResult]], news: PassNews
) -> Iterator[CreatesInFlight]:
    """Listening to `news` and with the threads the creates run on, for as long as the block;
    leaving it waits for every create sent."""
    with ExitStack() as stack:
        changed = stack.enter_context(news.listening())
        pool = stack.enter_context(ThreadPoolExecutor(CREATE_CONCURRENCY))
        yield CreatesInFlight(create, news, changed, pool)
