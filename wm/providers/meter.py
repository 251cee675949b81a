"""SDK calls counted for one caller (a scan), whichever thread sends them.

The gate counts every call of its provider (`Gate.attempts`), but a provider's regions are
scanned at once by threads sharing it, so a scan's own figure cannot be a difference of that
counter. A caller opens a meter (`metered`); the gate adds each call it sends to the meter of
the context it runs in. A provider that fans calls out to threads of its own hands them the
caller's context (`carry`).
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class CallMeter:
    """The SDK calls made for one caller, per operation (attempts, as `Gate.attempts`)."""

    def __init__(self) -> None:
        self._calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, operation: str) -> None:
        with self._lock:
            self._calls[operation] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._calls)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._calls.values())


_CURRENT: contextvars.ContextVar[CallMeter | None] = contextvars.ContextVar(
    "wm_call_meter", default=None
)


@contextmanager
def metered() -> Iterator[CallMeter]:
    """Count the calls made in this context (and contexts carried from it) until the end."""
    meter = CallMeter()
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def count_call(operation: str) -> None:
    """The gate sends a call: add it to the caller's meter, if the caller keeps one."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add(operation)


def carry(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn`, to run on another thread in the context of the thread that called `carry`."""
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        # A context cannot be entered by two threads at once: each run gets its own copy,
        # which still holds the same meter.
        return context.copy().run(fn, *args, **kwargs)

    return run
