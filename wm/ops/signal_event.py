"""A stop flag that a signal handler may set.

Python runs a signal handler in the main thread between two of its bytecodes, wherever that
thread is. `threading.Event.set()` takes the event's lock, a plain Lock, which the main thread
itself holds for a moment on every turn of `while not stop.wait(0.5)`: a SIGTERM handled in
that moment waits for a lock its own thread holds, and the process hangs until it is killed.
Two signals at once make it likely (a platform's SIGTERM to the whole process group, and a
parent's own SIGTERM to its children, as the provisioner's are stopped): one in a few hundred
stops on a busy machine, one in two when the main thread waits in a tight loop. This event's
lock is re-entrant, so a handler's `set()` goes through whatever the main thread was doing.
"""

from __future__ import annotations

import threading


class SignalSafeEvent(threading.Event):
    """A threading.Event whose set() may be called from a signal handler."""

    def __init__(self) -> None:
        super().__init__()
        self._reentrant = threading.Condition(threading.RLock())
        self._is_set = False

    def is_set(self) -> bool:
        return self._is_set

    def set(self) -> None:
        with self._reentrant:
            self._is_set = True
            self._reentrant.notify_all()

    def clear(self) -> None:
        with self._reentrant:
            self._is_set = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._reentrant:
            # A handler that set it while this thread held the lock, before waiting, is seen
            # here: the predicate is read before any wait.
            return self._reentrant.wait_for(lambda: self._is_set, timeout)
