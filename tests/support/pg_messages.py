"""A TCP proxy in front of Postgres that counts what its clients send: each simple-protocol
query (`Q`, what psycopg2 sends for every statement, BEGIN, COMMIT and ROLLBACK included) is
one round trip. For tests that count the round trips a design makes, where timing could not
tell them apart."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SSL_REQUEST = 80877103  # the one untyped message a client may send before its startup message


class CountingProxy:
    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._queries: list[str] = []
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def queries(self) -> list[str]:
        """The statements sent so far, each by its first word (BEGIN, SELECT, UPDATE, ...)."""
        with self._lock:
            return list(self._queries)

    def clear(self) -> None:
        with self._lock:
            self._queries.clear()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self._target)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(
                target=self._client_to_server, args=(client, server), daemon=True
            ).start()
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def _client_to_server(self, client: socket.socket, server: socket.socket) -> None:
        pending, started = b"", False
        try:
            while data := client.recv(65536):
                pending += data
                while True:
                    if not started:  # untyped: length, then a code
                        if len(pending) < 8 or len(pending) < struct.unpack("!I", pending[:4])[0]:
                            break
                        length, code = struct.unpack("!II", pending[:8])
                        pending, started = pending[length:], code != SSL_REQUEST
                        continue
                    if len(pending) < 5:
                        break
                    kind, length = pending[:1], struct.unpack("!I", pending[1:5])[0]
                    if len(pending) < 1 + length:
                        break
                    body, pending = pending[5 : 1 + length], pending[1 + length :]
                    if kind == b"Q":
                        text = body.rstrip(b"\0").decode(errors="replace").split()
                        with self._lock:
                            self._queries.append(text[0].upper() if text else "")
                # Counted before it is sent: no answer reaches the client before its count.
                server.sendall(data)
        except OSError:
            pass
        finally:
            server.close()


@contextmanager
def counting_proxy(host: str, port: int) -> Iterator[CountingProxy]:
    proxy = CountingProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.close()
