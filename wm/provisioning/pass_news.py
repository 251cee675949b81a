"""News of new demand, for a provisioning pass whose creates are still in flight.

A pass reads its pools' demand once, then may wait seconds for its creates (a RunInstances of
250 instances, a round of ARM PUTs behind the gate). Tasks that arrive for its other pools in
the meantime would wait for all of it; told the news, the pass plans its pools again while it
waits, and their launches go out beside the ones in flight.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class PassNews:
    """One provider's news: told by whoever hears of new tasks (the NOTIFY listener), taken by
    the pass that plans for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._news = False
        self._listeners: set[threading.Event] = set()

    def tell(self) -> None:
        """Tasks arrived for one of the provider's pools."""
        with self._lock:
            self._news = True
            for listener in self._listeners:
                listener.set()

    def take(self) -> bool:
        """Whether news came since the last take; forgets it."""
        with self._lock:
            news, self._news = self._news, False
        return news

    @contextlib.contextmanager
    def listening(self) -> Iterator[threading.Event]:
        """An event set at each news while the block lasts; the pass sets it too when one of
        its creates ends, so one wait covers both."""
        event = threading.Event()
        with self._lock:
            self._listeners.add(event)
        try:
            yield event
        finally:
            with self._lock:
                self._listeners.discard(event)
