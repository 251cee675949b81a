"""Claims: who runs a pool's provisioning pass, or a region's scan, right now.

Each claim is a row lock taken with `FOR UPDATE SKIP LOCKED` in a transaction on a connection
of its own, held for the whole pass. A replica that dies drops its connection and Postgres
releases the lock at once: no lease to time out. A busy claim is not an error: it returns
nothing and bumps `wm_claims_busy_total`.

A provisioning claim protects the step from reading capacity to committing intents: a peer
that claims the pool afterwards must see those intents. So the intents are inserted on the
claim's own connection and committed together with the end of its transaction; when that
connection dies first (killed, or Postgres restarted), the insert fails with it and the pass
launches nothing, while the peer that takes the released claim sees no half-made pass. The
locks are taken again at once for the creates, so no peer recovers intents still in flight.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, any_, func, literal, or_, select, update
from sqlalchemy.exc import DBAPIError

from wm.db.tables import scan_units, worker_pools
from wm.db.workers import NewWorker, insert_intent_rows
from wm.telemetry import CLAIMS_BUSY, log


@dataclass
class PoolClaims:
    """The pools this replica may provision (or drain) until the block ends."""

    provider_id: str
    pool_ids: tuple[str, ...]
    _conn: Connection
    lost: tuple[str, ...] = ()  # pools a peer claimed while the intents were being committed

    def drop_previous_provider(self, pool_ids: Sequence[str]) -> None:
        """Forget this provider on pools that have no live workers left on it."""
        if not pool_ids:
            return
        # On the claim's own connection: another connection would wait on this very lock.
        self._conn.execute(
            update(worker_pools)
            .where(worker_pools.c.pool_id.in_(list(pool_ids)))
            .values(
                previous_provider_ids=func.array_remove(
                    worker_pools.c.previous_provider_ids, self.provider_id
                ),
                last_modified=func.now(),
            )
        )

    def commit_intents(self, intents: Sequence[NewWorker]) -> None:
        """Commit the intent rows with the claim's transaction, all or none, then claim the
        same pools again for the creates. Raises if the claim's connection died: nothing of
        this pass is then committed, and nothing may be launched."""
        if not intents:
            return
        insert_intent_rows(self._conn, intents)
        self._conn.commit()
        held = set(self._conn.execute(_lock_pools(self.pool_ids)).scalars())
        # A peer that got in between saw the intents: it launches nothing for them.
        self.lost = tuple(p for p in self.pool_ids if p not in held)


def _lock_pools(pool_ids: Sequence[str]):
    # NO KEY UPDATE: strong enough to exclude other claimers, weak enough that inserting
    # workers (whose foreign key takes KEY SHARE on the pool) does not wait on it.
    return (
        select(worker_pools.c.pool_id)
        .where(worker_pools.c.pool_id.in_(list(pool_ids)))
        .order_by(worker_pools.c.pool_id)
        .with_for_update(skip_locked=True, key_share=True)
    )


@contextlib.contextmanager
def claim_provider_pools(engine: Engine, provider_id: str) -> Iterator[PoolClaims]:
    """Claim every pool on this provider (current or previous) that no other replica holds."""
    with engine.connect() as conn:
        wanted = or_(
            worker_pools.c.provider_id == provider_id,
            literal(provider_id) == any_(worker_pools.c.previous_provider_ids),
        )
        total = conn.execute(select(func.count()).where(wanted)).scalar_one()
        claimed = conn.execute(
            select(worker_pools.c.pool_id)
            .where(wanted)
            .order_by(worker_pools.c.pool_id)
            .with_for_update(skip_locked=True, key_share=True)
        ).scalars()
        pool_ids = tuple(claimed)
        if len(pool_ids) < total:
            CLAIMS_BUSY.labels("pool").inc(total - len(pool_ids))
        if pool_ids:
            conn.execute(
                update(worker_pools)
                .where(worker_pools.c.pool_id.in_(pool_ids))
                .values(last_provisioned=func.now())
            )
        try:
            yield PoolClaims(provider_id, pool_ids, conn)
        except BaseException:
            _release(conn, provider_id, commit=False)
            raise
        _release(conn, provider_id, commit=True)


def _release(conn: Connection, provider_id: str, *, commit: bool) -> None:
    """End the claim's transaction. A claim whose connection died is already released: what
    the pass committed elsewhere stands, so that is logged, not raised."""
    try:
        if commit:
            conn.commit()
        else:
            conn.rollback()
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
        log("claim-lost", logging.WARNING, provider=provider_id, error=type(exc.orig).__name__)


@contextlib.contextmanager
def claim_scan(
    engine: Engine, provider_id: str, region: str, replica: str, min_gap_s: float = 0.0
) -> Iterator[bool]:
    """Claim one (provider, region) scan; yields False when another replica is scanning it,
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
            yield False
            return
        last_started, now = row
        if last_started is not None and (now - last_started).total_seconds() < min_gap_s:
            yield False
            return
        where = (scan_units.c.provider_id == provider_id) & (scan_units.c.region == region)
        conn.execute(
            update(scan_units)
            .where(where)
            .values(last_scan_started=func.now(), last_scan_by=replica)
        )
        yield True
        conn.execute(update(scan_units).where(where).values(last_scan_finished=func.now()))
