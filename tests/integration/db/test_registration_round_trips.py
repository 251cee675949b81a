"""The round trips a registration costs the web process, counted at the wire: each of its
statements is one (no pre-ping, no BEGIN, COMMIT or ROLLBACK around it), where each was four
before issue 28 (a ping, BEGIN, the statement, COMMIT or ROLLBACK). A boot storm's throughput
per process is bound by them (bench/README.md, "registration")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, make_url, text

from tests.support.pg_messages import CountingProxy, counting_proxy
from wm.db import api_reads, worker_writes
from wm.db.engine import make_engine


@pytest.fixture
def proxy(db_url: str) -> Iterator[tuple[CountingProxy, Engine]]:
    url = make_url(db_url)
    with counting_proxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        engine = make_engine(through, application_name="wm-web")
        try:
            with engine.connect() as conn:  # connected: its set-up queries are not counted
                conn.execute(text("SELECT 1"))
            yield proxy, engine
        finally:
            engine.dispose()


def transaction(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("SELECT 1"))


CALLS: dict[str, tuple[Callable[[Engine], Any], list[str]]] = {
    "registerWorker's read": (
        lambda e: api_reads.registration_target(e, "proj/pool", "g", "w"),
        ["SELECT"],
    ),
    "registerWorker's write": (
        lambda e: worker_writes.register(e, "w", "hash", 3600.0),
        ["UPDATE"],
    ),
    "a createWorker worker's registration": (
        lambda e: worker_writes.check_in(e, "w", "hash", 3600.0),
        ["UPDATE"],
    ),
    "reregisterWorker": (
        lambda e: worker_writes.reregister(
            e, "proj/pool", "g", "w", "old", "new", hand_made_providers=["static"],
            hand_made_timeout_s=3600.0,
        ),
        ["UPDATE"],
    ),
    "a transaction elsewhere (no ping before it)": (transaction, ["BEGIN", "SELECT", "COMMIT"]),
}  # fmt: skip


@pytest.mark.parametrize("name", CALLS)
def test_each_registration_statement_is_one_round_trip(
    proxy: tuple[CountingProxy, Engine], name: str
):
    counting, engine = proxy
    call, expected = CALLS[name]
    counting.clear()

    call(engine)

    assert counting.queries() == expected
