"""Whether the database holds the schema this wm needs, and waiting until it does.

Alembic keeps the revision a database is at in `alembic_version`; wm needs its newest (head).
A command refuses a database at any other revision with a line naming the fix; a process
started beside `release` (`wm db upgrade`) waits for it, since the platform may start both at
once. One check of the revision, never one per query.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine, make_url, text
from sqlalchemy.exc import OperationalError

from wm.db import migrate
from wm.errors import SchemaNotReady
from wm.ops.telemetry import log

POLL_S = 1.0
NOT_CHECKED = "the database's schema has not been checked yet"


@dataclass
class Readiness:
    """What a process's one schema watcher last found, for its health checks to read (a plain
    attribute: read on every probe, written by one thread)."""

    problem: str | None = NOT_CHECKED  # None: the schema is the one wm needs

    @property
    def ready(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class SchemaState:
    current: str | None  # the database's revision; None: no wm schema at all
    head: str  # the revision this wm needs
    known: bool  # whether `current` is one of this wm's revisions (else a newer wm's)

    @property
    def ready(self) -> bool:
        return self.current == self.head


_REVISION_LINE = re.compile(r'^(down_revision|revision) = "([^"]+)"$', re.MULTILINE)


@functools.cache
def revisions() -> tuple[str, frozenset[str]]:
    """The head and every revision of wm's migrations, read from their files' `revision` and
    `down_revision` lines (alembic's own reading costs a process 0.2 s of start-up; a test
    holds the two to the same answer)."""
    revision_of: dict[str, str | None] = {}
    for path in migrate.VERSIONS_DIR.glob("*.py"):
        lines = dict(_REVISION_LINE.findall(path.read_text()))
        if "revision" in lines:
            revision_of[lines["revision"]] = lines.get("down_revision")
    heads = set(revision_of) - set(revision_of.values())
    if len(heads) != 1:  # wm's migrations are one line: alembic would refuse too
        raise RuntimeError(f"wm's migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop(), frozenset(revision_of)


def schema_state(engine: Engine) -> SchemaState:
    head, known = revisions()
    current = current_revision(engine)
    return SchemaState(current, head, current is None or current in known)


def current_revision(engine: Engine) -> str | None:
    """Alembic's record of the revision, read directly: its MigrationContext would log two
    lines at each look of a process that waits."""
    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def where(engine: Engine) -> str:
    """The database as a message names it: host, port and name, never the password."""
    url = make_url(str(engine.url))
    if url.host:
        return f"{url.host}:{url.port or 5432}/{url.database}"
    return str(url.database)


def problem(state: SchemaState, database: str) -> str | None:
    """What is wrong with the schema, in one line naming the fix; None when it is ready."""
    if state.ready:
        return None
    if state.current is None:
        return f"the database at {database} has no wm schema: run `wm db upgrade`"
    if state.known:
        return (
            f"the database at {database} is at revision {state.current}, wm needs "
            f"{state.head}: run `wm db upgrade`"
        )
    return (
        f"the database at {database} is at revision {state.current}, which this wm does not "
        f"know (its newest is {state.head}): a newer wm migrated it; run that version"
    )


def require(engine: Engine) -> None:
    """Raise SchemaNotReady unless the database is at wm's revision (for commands)."""
    found = problem(schema_state(engine), where(engine))
    if found is not None:
        raise SchemaNotReady(found)


def look(engine: Engine) -> str | None:
    """What keeps the database from being used now, a database that does not answer
    included; None when it is ready."""
    try:
        return problem(schema_state(engine), where(engine))
    except OperationalError as exc:
        return f"cannot reach the database at {where(engine)}: {str(exc.orig).strip()}"


def wait(
    engine: Engine,
    timeout_s: float,
    *,
    process: str,
    stop: threading.Event | None = None,
    readiness: Readiness | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Wait until the database is at wm's revision (a process started beside `release`):
    log once that it waits and why, and again when it is ready. Returns False when `stop`
    was set first; raises SchemaNotReady after `timeout_s` with what is still wrong. A
    database that does not answer yet is waited for too, and so is one a newer wm migrated
    (its release is under way: this process is about to be replaced). `readiness`, when
    given, holds what is still wrong at each look."""
    readiness = readiness or Readiness()
    stop = stop or threading.Event()
    database = where(engine)
    deadline = clock() + timeout_s
    said: str | None = None
    while True:
        found = look(engine)
        readiness.problem = found
        if found is None:
            if said is not None:
                log("schema-ready", process=process, database=database)
            return True
        if found != said:
            log(
                "waiting-for-schema",
                logging.WARNING,
                process=process,
                problem=found,
                timeout_s=timeout_s,
            )
            said = found
        if clock() >= deadline:
            raise SchemaNotReady(f"{found} (waited {timeout_s:g} s)")
        if stop.wait(POLL_S):
            return False
