"""The engine's pooled connections: pinged at checkout only when they may have died in the
pool (wm/db/engine.py), and single statements sent in autocommit, with no transaction's round
trips around them."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DisconnectionError

from wm.db.engine import PING_AFTER_IDLE_S, check_on_checkout, normalise_url, one_statement

WAIT_S = 10


@dataclass
class FakeDriverConnection:
    """A driver connection with a real socket (so `spoke` polls something) and a cursor that
    records what it is sent."""

    sock: socket.socket
    fails: bool = False
    closed: int = 0
    sent: list[str] = field(default_factory=list)
    rolled_back: int = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def cursor(self) -> Any:
        return self

    def execute(self, statement: str) -> None:
        if self.fails:
            raise OSError("server closed the connection unexpectedly")
        self.sent.append(statement)

    def close(self) -> None:
        pass

    def rollback(self) -> None:
        self.rolled_back += 1


@dataclass
class FakeRecord:
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    name: str
    idle_s: float | None  # None: never checked in (just connected)
    server_spoke: bool = False
    closed: bool = False
    ping_fails: bool = False
    pinged: bool = False
    replaced: bool = False  # a DisconnectionError: the pool connects afresh


CASES = [
    Case("just connected", idle_s=None),
    Case("used a moment ago, silent", idle_s=0.0),
    Case("used a moment ago, the server spoke (its goodbye)", idle_s=0.0, server_spoke=True,
         pinged=True),
    Case("the server spoke and its ping fails", idle_s=0.0, server_spoke=True, ping_fails=True,
         replaced=True),
    Case("idle longer than the ping interval", idle_s=PING_AFTER_IDLE_S + 1, pinged=True),
    Case("idle long and dead", idle_s=PING_AFTER_IDLE_S + 1, ping_fails=True, replaced=True),
    Case("closed by the driver", idle_s=0.0, closed=True, ping_fails=True, replaced=True),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_pooled_connection_is_pinged_only_when_it_may_be_dead(case: Case):
    ours, server = socket.socketpair()
    try:
        driver = FakeDriverConnection(ours, fails=case.ping_fails, closed=int(case.closed))
        if case.server_spoke:
            server.sendall(b"E")  # a message waiting to be read
        record = FakeRecord()
        if case.idle_s is not None:
            record.info["wm_idle_since"] = time.monotonic() - case.idle_s
        if case.replaced:
            with pytest.raises(DisconnectionError):
                check_on_checkout(driver, record, None)  # type: ignore[arg-type]
        else:
            check_on_checkout(driver, record, None)  # type: ignore[arg-type]
        assert driver.sent == (["SELECT 1"] if case.pinged else [])
        assert driver.rolled_back == (1 if case.pinged else 0)
    finally:
        ours.close()
        server.close()


def backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


@pytest.fixture
def admin(db_url: str) -> Iterator[Engine]:
    admin = create_engine(normalise_url(db_url), isolation_level="AUTOCOMMIT")
    yield admin
    admin.dispose()


def test_a_connection_killed_in_the_pool_is_replaced_at_checkout(engine: Engine, admin: Engine):
    killed = backend_pid(engine)  # the pool now holds this connection, idle
    with admin.connect() as conn:
        assert conn.execute(text(f"SELECT pg_terminate_backend({killed})")).scalar_one()
        deadline = time.monotonic() + WAIT_S
        gone = "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = :pid"
        while not conn.execute(text(gone), {"pid": killed}).scalar_one():
            assert time.monotonic() < deadline, "the killed backend did not go"
            time.sleep(0.02)
    # No error: the checkout saw the server's goodbye, pinged, and connected afresh.
    assert backend_pid(engine) != killed


def test_one_statement_commits_on_its_own_and_hands_back_a_transactional_connection(
    engine: Engine,
):
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE one_statement_probe (n int)"))
    with one_statement(engine) as conn:
        conn.execute(text("INSERT INTO one_statement_probe VALUES (1)"))
        # no commit: autocommit made the insert its own transaction
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM one_statement_probe")).scalar_one() == 1
        assert conn.connection.dbapi_connection.autocommit is False  # type: ignore[union-attr]
        conn.execute(text("INSERT INTO one_statement_probe VALUES (2)"))
        conn.rollback()  # a transaction again: this insert is undone
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM one_statement_probe")).scalar_one() == 1
