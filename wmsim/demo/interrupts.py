"""How a running demo is asked to stop: SIGTERM as Ctrl-C, and a flag every wait loop checks, so
that everything the demo started is stopped on the way out."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class _StopAsked:
    """Whether SIGTERM or Ctrl-C asked the demo to stop.

    The signal handler raises KeyboardInterrupt where the main thread happens to be; when that
    is inside a finaliser (a `__del__`, a weakref callback) Python prints the exception and
    drops it. The flag survives that, and every wait loop raises it again at its next tick.
    """

    asked = False


def raise_if_stop_asked() -> None:
    if _StopAsked.asked:
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupted_by_sigterm() -> Iterator[None]:
    """SIGTERM stops the demo as Ctrl-C does: everything it started is stopped on the way out."""
    import signal

    def stop(_signum: int, _frame: object) -> None:
        _StopAsked.asked = True
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
