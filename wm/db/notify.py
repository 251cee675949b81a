"""LISTEN/NOTIFY: wake a process as soon as something it waits for is committed."""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Callable

from sqlalchemy import Engine

from wm.ops.telemetry import log

POLL_S = 1.0
RECONNECT_S = 2.0


def listen_forever(
    engine: Engine, channel: str, on_payload: Callable[[str], None], stop: threading.Event
) -> None:
    """Call on_payload for every notification until stop is set; reconnect after failures."""
    while not stop.is_set():
        try:
            _listen(engine, channel, on_payload, stop)
        except Exception as exc:
            log("listen-reconnecting", logging.WARNING, channel=channel, error=type(exc).__name__)
            stop.wait(RECONNECT_S)


def _listen(
    engine: Engine, channel: str, on_payload: Callable[[str], None], stop: threading.Event
) -> None:
    pooled = engine.raw_connection()
    try:
        conn = pooled.driver_connection
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(f"LISTEN {channel}")
        while not stop.is_set():
            ready, _, _ = select.select([conn], [], [], POLL_S)
            if not ready:
                continue
            conn.poll()
            while conn.notifies:
                on_payload(conn.notifies.pop(0).payload)
    finally:
        pooled.invalidate()  # never hand a LISTENing connection back to the pool
        pooled.close()


def start_listener(
    engine: Engine, channel: str, on_payload: Callable[[str], None], stop: threading.Event
) -> threading.Thread:
    thread = threading.Thread(
        target=listen_forever,
        args=(engine, channel, on_payload, stop),
        daemon=True,
        name=f"listen-{channel}",
    )
    thread.start()
    return thread
