"""The simulated clouds in a process of their own (CloudProcess), and the one reach into a started
sim: a WSGI middleware put in front of its server (wrap_app)."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection
from typing import Any, Self

from bench.cloud_calls import WsgiApp
from bench.common import JOIN_TIMEOUT_S

CLOUDS_START_TIMEOUT_S = 60.0


def wrap_app(sim: Any, wrap: Callable[[WsgiApp], WsgiApp]) -> WsgiApp:
    """Put a WSGI middleware in front of a started sim; returns the middleware.

    The one reach into a sim's insides: its werkzeug server's app, wrapped before any request
    (wmsim/wsgi.py: ServerThread._server is a BaseWSGIServer).
    """
    server = sim._server._server
    server.app = wrapped = wrap(server.app)
    return wrapped


def serve_clouds(conn: Connection, make_host: Callable[..., Any], args: tuple) -> None:
    """The clouds' process: `make_host(*args, stack)` starts the sims; then each request
    `(method, args)` is answered with `("ok", host.method(*args))` or `("error", repr)` until
    "stop". The host's `ready()` is sent first."""
    with contextlib.ExitStack() as stack:
        try:
            host = make_host(*args, stack)
        except Exception as exc:
            conn.send({"error": repr(exc)})
            return
        conn.send(host.ready())
        while True:
            request = conn.recv()
            if request == "stop":
                break
            name, call_args = request
            try:
                conn.send(("ok", getattr(host, name)(*call_args)))
            except Exception as exc:
                conn.send(("error", f"{name}: {exc!r}"))
    conn.send("stopped")


class CloudProcess:
    """The simulated clouds in a process of their own, so their work (moto's above all) does not
    share the benchmark's GIL: wm is measured, not the simulation.

    The host (built in the child by `make_host(*args, stack)`) answers `ready()` with at least
    {"endpoints": {cloud: url}, "cert_path": ARM's certificate}; `ask` calls its methods.
    Answers cross the process boundary pickled: plain data only (a dataclass of a module run as
    __main__ does not unpickle in the other process).
    """

    def __init__(self, conn: Connection, ready: Mapping[str, Any]) -> None:
        self.ready = dict(ready)
        self.endpoints: dict[str, str] = ready["endpoints"]
        self.cert_path: str = ready["cert_path"]
        self._conn = conn
        self._lock = threading.Lock()

    @classmethod
    @contextlib.contextmanager
    def running(cls, make_host: Callable[..., Any], *args: Any) -> Iterator[Self]:
        context = multiprocessing.get_context("spawn")  # no copy of this process's threads
        conn, child_conn = context.Pipe()
        process = context.Process(
            target=serve_clouds, args=(child_conn, make_host, args), name="bench-clouds"
        )
        process.start()
        child_conn.close()
        try:
            if not conn.poll(CLOUDS_START_TIMEOUT_S):
                raise RuntimeError("the simulated clouds did not start")
            ready = conn.recv()
            if "error" in ready:
                raise RuntimeError(f"the simulated clouds did not start: {ready['error']}")
            yield cls(conn, ready)
        finally:
            with contextlib.suppress(OSError, EOFError):
                conn.send("stop")
                if conn.poll(JOIN_TIMEOUT_S):
                    conn.recv()
            process.join(JOIN_TIMEOUT_S)
            if process.is_alive():
                process.terminate()
                process.join(JOIN_TIMEOUT_S)
            conn.close()

    def ask(self, method: str, *args: Any) -> Any:
        with self._lock:
            self._conn.send((method, args))
            status, value = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"the simulated clouds failed: {value}")
        return value
