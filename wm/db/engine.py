"""Engines: the only place that talks to the database driver's settings.

A pooled connection is not pinged at every checkout (SQLAlchemy's `pool_pre_ping`: a round trip
before every transaction, one in four of a registration's). It is pinged
only when it may have died unnoticed (`check_on_checkout`): when the server has sent it
something while it sat in the pool (a restart or `pg_terminate_backend` sends its FATAL
message and closes the socket, which a zero-timeout poll sees without a round trip), or when
it has sat idle longer than `PING_AFTER_IDLE_S` (a connection dropped silently, by a NAT or a
failover, is one that sat idle). A connection whose ping fails is replaced at once, as with
pre-ping. What neither catches, a connection killed in the seconds since it was last used
without a word to its socket, fails its statement; SQLAlchemy then drops every pooled
connection older than that failure, so one request sees it, answered as any database fault
(the web process: 503 with Retry-After).
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, exc, make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

CONNECT_TIMEOUT_S = 10
POOL_SIZE = 5
POOL_MAX_OVERFLOW = 5
# The database is unreachable, restarting, or its pool exhausted: the web process answers 503
# (retry later), and error reports group them as one outage. Any other database error is a bug.
DATABASE_DOWN = (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError, exc.TimeoutError)
# A connection used this recently is not pinged at checkout unless the server spoke to it.
PING_AFTER_IDLE_S = 10.0
_IDLE_SINCE = "wm_idle_since"  # in each pooled connection's `info`: its last checkin


def normalise_url(url: str) -> str:
    """The URL with the driver SQLAlchemy should use."""
    # Heroku-style platforms hand out postgres://, which SQLAlchemy 2 no longer accepts.
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


def make_engine(url: str, *, application_name: str = "wm", pool_size: int = POOL_SIZE) -> Engine:
    engine = create_engine(
        normalise_url(url),
        pool_size=pool_size,
        max_overflow=POOL_MAX_OVERFLOW,
        connect_args={
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": application_name,
        },
    )
    # Reconnect transparently after a Postgres restart, pinging only what may be dead.
    event.listen(engine, "checkin", note_checkin)
    event.listen(engine, "checkout", check_on_checkout)
    return engine


def note_checkin(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info[_IDLE_SINCE] = time.monotonic()


def check_on_checkout(
    dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
) -> None:
    """Pings a pooled connection that may have died while in the pool; one that fails its
    ping is a DisconnectionError, on which the pool connects afresh (and tries no more)."""
    idle_since = record.info.get(_IDLE_SINCE)
    if idle_since is None:  # just connected
        return
    if not (time.monotonic() - idle_since > PING_AFTER_IDLE_S or spoke(dbapi_connection)):
        return
    try:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT 1")
        finally:
            cursor.close()
        dbapi_connection.rollback()  # the ping's transaction (psycopg2 began one)
    except Exception as error:
        raise exc.DisconnectionError(f"pooled connection is gone: {error}") from error


def spoke(dbapi_connection: Any) -> bool:
    """Whether an idle connection has something to read, or is closed: an idle connection
    that asked nothing is sent nothing, but the server's goodbye (a FATAL message, then the
    end of the stream). A poll with no wait: no round trip."""
    if getattr(dbapi_connection, "closed", 0):
        return True
    try:
        poller = select.poll()  # not select(): no limit on the descriptor's number
        poller.register(dbapi_connection.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):  # no socket any more
        return True


@contextmanager
def one_statement(engine: Engine) -> Iterator[Connection]:
    """A connection for a single statement, which is its own transaction (autocommit): no
    BEGIN, COMMIT or ROLLBACK round trips around it. Only for one statement a connection:
    two would not see one snapshot, nor commit together."""
    with autocommitting(engine) as conn:
        yield conn


@contextmanager
def autocommitting(engine: Engine) -> Iterator[Connection]:
    """A connection on which every statement is its own transaction, committed as it ends:
    for a caller whose statements need neither one snapshot nor to commit together (a claim's
    session-level locks, each statement atomic alone).

    The driver's own autocommit switch, not SQLAlchemy's AUTOCOMMIT isolation level: psycopg2
    sends a SET (a round trip) to put the isolation level back when a connection leaves
    autocommit that way, and flipping `autocommit` alone is client-side. SQLAlchemy's commits
    and rollbacks have no transaction to end, so psycopg2 sends nothing for them."""
    with engine.connect() as conn:
        driver = conn.connection.dbapi_connection
        assert driver is not None  # a connection just checked out holds one
        driver.autocommit = True
        try:
            yield conn
        finally:
            if not driver.closed:  # a disconnect closed it: the pool discards it
                driver.autocommit = False  # as the pool hands connections out


def ping(engine: Engine) -> None:
    """One round trip; raises when the database does not answer (health checks)."""
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def with_database(url: str, database: str) -> str:
    return make_url(normalise_url(url)).set(database=database).render_as_string(hide_password=False)


def create_database(admin_url: str, name: str, template: str | None = None) -> None:
    admin = create_engine(normalise_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            suffix = f' TEMPLATE "{template}"' if template else ""
            conn.execute(text(f'CREATE DATABASE "{name}"{suffix}'))
    finally:
        admin.dispose()


def drop_database(admin_url: str, name: str) -> None:
    admin = create_engine(normalise_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def redacted(url: str | URL) -> str:
    return make_url(str(url)).render_as_string(hide_password=True)
