"""A local HTTP server standing in for Sentry: a DSN's endpoint that keeps the events it is sent.

The SDK in a wm process sends real envelopes (`POST /api/<project>/envelope/`, maybe gzipped);
this parses their event items. Bound to 127.0.0.1 only.
"""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


def envelope_items(body: bytes) -> Iterator[tuple[dict[str, Any], bytes]]:
    """(item header, payload) of each item of an envelope (develop.sentry.dev envelopes)."""
    _header, _, rest = body.partition(b"\n")
    while rest.strip():
        line, _, rest = rest.partition(b"\n")
        item = json.loads(line)
        if "length" in item:
            payload, rest = rest[: item["length"]], rest[item["length"] :]
            rest = rest.removeprefix(b"\n")
        else:
            payload, _, rest = rest.partition(b"\n")
        yield item, payload


@dataclass
class SentryServer:
    """What a local Sentry received: every event, in the order it arrived."""

    port: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    item_types: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def dsn(self) -> str:
        return f"http://publickey@127.0.0.1:{self.port}/1"

    def received(self, body: bytes) -> None:
        for item, payload in envelope_items(body):
            with self._lock:
                self.item_types.add(item.get("type", ""))
                if item.get("type") == "event":
                    self.events.append(json.loads(payload))

    def matching(self, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        with self._lock:
            return [event for event in self.events if predicate(event)]

    def wait_for(
        self, predicate: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.1
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.summary()}")
            time.sleep(poll_s)

    def summary(self) -> list[tuple[str, Any, Any]]:
        """(wm event, tags, fingerprint) of each event: what an assertion shows."""
        with self._lock:
            return [
                ((e.get("logentry") or {}).get("message"), e.get("tags"), e.get("fingerprint"))
                for e in self.events
            ]


@contextmanager
def sentry_server() -> Iterator[SentryServer]:
    server = SentryServer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            server.received(body)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.port = http_server.server_address[1]
    thread = threading.Thread(target=http_server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        http_server.shutdown()
        http_server.server_close()
