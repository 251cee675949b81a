"""Claims: who runs a pool's provisioning pass, or a region's scan, right now.

A claim lives on a connection of its own, held for the whole pass; a replica that dies drops
its connection and Postgres releases the claim at once: no lease to time out. A busy claim is
not an error: it returns nothing and bumps `wm_claims_busy_total`.

A scan claim is a row lock on the scan unit (`FOR UPDATE SKIP LOCKED`) in a transaction that
lasts the scan. A provisioning claim is a session-level advisory lock per pool
(`pg_try_advisory_lock`), because it must outlive a commit: it protects the step from reading
capacity to committing intents, so a peer that claims the pool afterwards sees those intents.
The intents are inserted and committed on the claim's own connection: when that connection
dies first (killed, or Postgres restarted), the claim and the uncommitted intents go together,
the pass launches nothing, and the peer that takes the claim finds no half-made pass. The claim
stays held through the creates, so no peer provisions the pool, or recovers its intents, while
they are in flight, and no transaction stays open across a cloud call. Every statement of a
claim's connection is a transaction of its own (autocommit: the pass's path to its first
create had a BEGIN and a COMMIT round trip around each): each is atomic alone, and the locks
are the session's, not a transaction's.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Text,
    any_,
    bindparam,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError

from wm.db.arrays import ids_array, ids_param
from wm.db.engine import autocommitting
from wm.db.tables import pg_locks, scan_units, worker_pools
from wm.db.worker_writes import insert_intent_rows
from wm.db.workers import NewWorker
from wm.model import WorkerRecord
from wm.ops.telemetry import CLAIMS_BUSY, log

POOL_CLAIM_NAMESPACE = "wm:pool-claim:"  # keeps these advisory lock keys apart from others'


def pool_claim_key(pool_id: str) -> int:
    """The advisory lock key of a pool's provisioning claim (a signed 64-bit integer)."""
    digest = hashlib.sha256((POOL_CLAIM_NAMESPACE + pool_id).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass
class PoolClaims:
    """The pools this replica may provision (or drain) until the block ends."""

    provider_id: str
    pool_ids: tuple[str, ...]
    _conn: Connection

    def drop_previous_provider(self, pool_ids: Sequence[str]) -> None:
        """Forget this provider on pools that have no live workers left on it."""
        if not pool_ids:
            return
        self._conn.execute(
            update(worker_pools)
            .where(worker_pools.c.pool_id == any_(ids_array(pool_ids)))
            .values(
                previous_provider_ids=func.array_remove(
                    worker_pools.c.previous_provider_ids, self.provider_id
                ),
                last_modified=func.now(),
            )
        )

    def commit_intents(self, intents: Sequence[NewWorker]) -> list[WorkerRecord]:
        """Commit the intent rows, all or none (one statement), on the claim's connection;
        return them. Raises if that connection died: the claim went with it, nothing of this
        pass is committed, and nothing may be launched."""
        if not intents:
            return []
        return insert_intent_rows(self._conn, intents)


def _candidates_statement():
    provider_id = bindparam("provider_id", type_=Text)
    wanted = or_(
        worker_pools.c.provider_id == provider_id,
        provider_id == any_(worker_pools.c.previous_provider_ids),
    )
    return select(worker_pools.c.pool_id).where(wanted).order_by(worker_pools.c.pool_id)


def _try_locks_statement():
    # Two array parameters, not a VALUES list: the statement is the same text at every pass
    # (a VALUES of 1,000 rows took longer to build than Postgres took to take the locks).
    keys = (
        func.unnest(ids_param("pool_ids"), bindparam("keys", type_=ARRAY(BigInteger)))
        .table_valued("pool_id", "key")
        .render_derived(name="claims")
    )
    # One statement; the lock function runs for exactly these rows.
    return select(keys.c.pool_id).where(func.pg_try_advisory_lock(keys.c.key))


# Every provisioning pass's statements, built once (wm/db/arrays.py: ids_param).
_CANDIDATES = _candidates_statement()
_TRY_LOCKS = _try_locks_statement()
_STAMP_PROVISIONED = (
    update(worker_pools)
    .where(worker_pools.c.pool_id == any_(ids_param("pool_ids")))
    .values(last_provisioned=func.now())
)
_UNLOCK_ALL = select(func.pg_advisory_unlock_all())


@contextlib.contextmanager
def claim_provider_pools(engine: Engine, provider_id: str) -> Iterator[PoolClaims]:
    """Claim every pool on this provider (current or previous) that no other replica holds."""
    with autocommitting(engine) as conn:
        candidates = list(conn.execute(_CANDIDATES, {"provider_id": provider_id}).scalars())
        pool_ids = _try_locks(conn, candidates)
        if len(pool_ids) < len(candidates):
            CLAIMS_BUSY.labels("pool").inc(len(candidates) - len(pool_ids))
        try:
            if pool_ids:
                conn.execute(_STAMP_PROVISIONED, {"pool_ids": list(pool_ids)})
            yield PoolClaims(provider_id, pool_ids, conn)
        finally:
            _release(conn, provider_id)


def _try_locks(conn: Connection, pool_ids: Sequence[str]) -> tuple[str, ...]:
    if not pool_ids:
        return ()
    params = {"pool_ids": list(pool_ids), "keys": [pool_claim_key(p) for p in pool_ids]}
    held = set(conn.execute(_TRY_LOCKS, params).scalars())
    return tuple(p for p in pool_ids if p in held)


def _release(conn: Connection, provider_id: str) -> None:
    """Give the claims up. A claim whose connection died is released already: what the pass
    committed stands, so that is logged, not raised."""
    try:
        conn.execute(_UNLOCK_ALL)
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            conn.invalidate()  # never hand a connection that may hold claims back to the pool
            raise
        log("claim-lost", logging.WARNING, provider=provider_id, error=type(exc.orig).__name__)


def held_pool_claims(engine: Engine, pool_ids: Sequence[str]) -> set[str]:
    """The pools whose provisioning claim some session holds right now: their passes may have
    creates in flight. Read from pg_locks, so asking takes no claim away from anyone."""
    if not pool_ids:
        return set()
    keys = {pool_claim_key(p): p for p in pool_ids}
    # A bigint advisory lock key shows in pg_locks as two 32-bit halves.
    key = (pg_locks.c.classid.cast(BigInteger).op("<<")(32)).op("|")(
        pg_locks.c.objid.cast(BigInteger)
    )
    query = select(key).where(
        pg_locks.c.locktype == "advisory", pg_locks.c.objsubid == 1, pg_locks.c.granted
    )
    with engine.connect() as conn:
        held = {_signed64(k) for k in conn.execute(query).scalars()}
    return {pool for k, pool in keys.items() if k in held}


def _signed64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class ScanClaim:
    """A (provider, region) this replica scans until the block ends."""

    started: datetime  # this scan's start, by the database's clock
    previous_start: datetime | None  # the last scan's, by any replica: what this one follows


@contextlib.contextmanager
def claim_scan(
    engine: Engine, provider_id: str, region: str, replica: str, min_gap_s: float = 0.0
) -> Iterator[ScanClaim | None]:
    """Claim one (provider, region) scan; yields None when another replica is scanning it,
    or when a scan of it started less than `min_gap_s` ago (a peer already scanned it this
    interval, so replicas share the regions instead of each scanning every one).
    """
    with engine.connect() as conn, conn.begin():
        row = conn.execute(
            select(scan_units.c.last_scan_started, func.now())
            .where(scan_units.c.provider_id == provider_id, scan_units.c.region == region)
            .with_for_update(skip_locked=True, key_share=True)
        ).first()
        if row is None:
            CLAIMS_BUSY.labels("scan").inc()
            yield None
            return
        last_started, now = row
        if last_started is not None and (now - last_started).total_seconds() < min_gap_s:
            yield None
            return
        where = (scan_units.c.provider_id == provider_id) & (scan_units.c.region == region)
        conn.execute(
            update(scan_units)
            .where(where)
            .values(last_scan_started=func.now(), last_scan_by=replica)
        )
        yield ScanClaim(started=now, previous_start=last_started)
        conn.execute(update(scan_units).where(where).values(last_scan_finished=func.now()))
