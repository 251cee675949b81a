"""The simulated clouds keep a client's connection open between requests, as the clouds' front
ends do: a new TCP connection (and TLS handshake, on ARM) for every SDK call would charge the
client CPU the real clouds never charge, and the benchmarks would count it as wm's."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from wmsim.wsgi import ServerThread


def echo_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Answers with the request's path, and with its body unread when the path says so."""
    path = environ["PATH_INFO"]
    body = b"" if path == "/ignore-body" else environ["wsgi.input"].read()
    answer = path.encode() + b":" + body
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [answer]


@pytest.fixture
def server() -> Iterator[ServerThread]:
    server = ServerThread(echo_app).start()
    yield server
    server.stop()


@pytest.fixture
def connection(server: ServerThread) -> Iterator[http.client.HTTPConnection]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    yield conn
    conn.close()


def ask(conn: http.client.HTTPConnection, path: str, body: bytes | None = None) -> bytes:
    conn.request("POST" if body is not None else "GET", path, body=body)
    response = conn.getresponse()
    assert response.getheader("Connection") != "close"
    return response.read()


def test_one_connection_carries_request_after_request(connection: http.client.HTTPConnection):
    conn = connection
    assert ask(conn, "/a") == b"/a:"
    first_socket = conn.sock
    assert ask(conn, "/b", b"payload") == b"/b:payload"
    assert ask(conn, "/c") == b"/c:"
    assert conn.sock is first_socket  # never reconnected


def test_a_body_the_app_left_unread_does_not_leak_into_the_next_request(
    connection: http.client.HTTPConnection,
):
    conn = connection
    assert ask(conn, "/ignore-body", b"GET /smuggled HTTP/1.1\r\n\r\n") == b"/ignore-body:"
    assert ask(conn, "/next") == b"/next:"


def test_a_stopped_server_closes_the_connections_it_kept(
    server: ServerThread, connection: http.client.HTTPConnection
):
    conn = connection
    assert ask(conn, "/a") == b"/a:"
    server.stop()
    with pytest.raises((ConnectionError, http.client.HTTPException, socket.timeout, OSError)):
        ask(conn, "/after-stop")
