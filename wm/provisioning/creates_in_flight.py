"""A pass's creates while they are out: sent in batches, each answer handed back as it comes,
and the one wait that ends when answers or news of new demand come (pass_news.py), or when
every create has answered.

Answers come back one create at a time (a batch of inserts or PUTs answers call by call,
`Provider.create`'s `answered`), not batch by batch: the pass records each VM the cloud took
while the rest are out, because a VM boots, and its worker registers, whether or not the
pass's slowest call has answered.

The pass decides what to do with answers and news (record them, plan again, send more); this
only sends and waits, so the pass reads as its steps and no planning runs from in here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from wm.providers.base import Answered, LaunchBatch, LaunchResult
from wm.provisioning.pass_news import PassNews

# Batches of one pass in flight at once. The gate bounds the calls (its concurrency, the
# cloud's buckets); this only has to keep a burst's batches from queueing behind one another.
CREATE_CONCURRENCY = 8
# Between two plannings of a pass whose creates are in flight: a stream of news (a NOTIFY per
# submission) costs at most one planning's statements this often.
LATE_ROUND_MIN_GAP_S = 0.05
# Answers are handed to the pass at most this often while creates are out (and all at once
# when the last has answered): a burst's answers, coming call by call, are recorded in one
# statement a second, not one each, and a pass that is all answered within it writes once.
# A VM takes far longer to boot and register (EC2's fastest, tens of seconds).
ANSWERS_EVERY_S = 1.0

# Creates a batch, telling `Answered` each of its results exactly once before returning.
Create = Callable[[LaunchBatch, Answered], list[LaunchResult]]


@dataclass(frozen=True)
class Wake:
    """What ended a wait while creates are out."""

    answered: list[LaunchResult]  # the create results answered since the last wake
    news: bool  # news of demand came and was taken: plan again


class CreatesInFlight:
    """Send batches with `send`; `next_wake` waits; `results` once it is None."""

    def __init__(
        self,
        create: Create,
        news: PassNews,
        changed: threading.Event,
        pool: ThreadPoolExecutor,
    ) -> None:
        self._create = create
        self._news = news
        self._changed = changed  # set at each news and at each answer
        self._pool = pool
        self._futures: list[Future[list[LaunchResult]]] = []
        self._lock = threading.Lock()
        self._answered: list[LaunchResult] = []  # answered, not yet handed to the pass
        self._planned_at = self._handed_at = time.monotonic()

    def send(self, batches: Sequence[LaunchBatch]) -> None:
        """Send `batches` beside those out; what follows them was planned now."""
        self._planned_at = time.monotonic()
        for batch in batches:
            future = self._pool.submit(self._create, batch, self._hand_back)
            future.add_done_callback(lambda _: self._changed.set())
            self._futures.append(future)

    def next_wake(self, stopped: threading.Event) -> Wake | None:
        """Wait until answers are due (ANSWERS_EVERY_S since the last were handed out, or
        every create has answered) or news came while some creates are still out (the news
        is taken, at most once every LATE_ROUND_MIN_GAP_S: the caller plans for it); None
        once every create has answered and every answer was handed out. A stopping process
        hears no news."""
        while True:
            # Read before the answers are taken: a batch tells all its results before its
            # future is done, so once all are done, the answers taken next are the last.
            done = all(f.done() for f in self._futures)
            now = time.monotonic()
            with self._lock:
                waiting = bool(self._answered)
            answers_due = waiting and (done or now - self._handed_at >= ANSWERS_EVERY_S)
            news_due = now - self._planned_at >= LATE_ROUND_MIN_GAP_S
            news = news_due and not done and not stopped.is_set() and self._news.take()
            if answers_due or news:
                with self._lock:
                    answered, self._answered = self._answered, []
                if answered:
                    self._handed_at = now
                if news:
                    self._planned_at = now
                return Wake(answered, news)
            if done:
                return None
            due_in = [] if news_due else [LATE_ROUND_MIN_GAP_S - (now - self._planned_at)]
            if waiting:
                due_in.append(ANSWERS_EVERY_S - (now - self._handed_at))
            self._changed.wait(min(due_in) if due_in else None)
            self._changed.clear()  # what set it is looked at again at the loop's top

    def results(self) -> dict[str, LaunchResult]:
        """Every create's result by worker id (every future has ended)."""
        return {r.worker_id: r for f in self._futures for r in f.result()}

    def _hand_back(self, result: LaunchResult) -> None:
        with self._lock:
            self._answered.append(result)
        self._changed.set()


@contextmanager
def creates_in_flight(create: Create, news: PassNews) -> Iterator[CreatesInFlight]:
    """Listening to `news` and with the threads the creates run on, for as long as the block;
    leaving it waits for every create sent."""
    with ExitStack() as stack:
        changed = stack.enter_context(news.listening())
        pool = stack.enter_context(ThreadPoolExecutor(CREATE_CONCURRENCY))
        yield CreatesInFlight(create, news, changed, pool)
