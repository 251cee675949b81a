"""Claims: who runs a pool's provisioning pass, or a region's scan, right now.

Each claim is a row lock taken with `FOR UPDATE SKIP LOCKED` in a transaction on a connection
of its own, held for the whole pass. A replica that dies drops its connection and Postgres
releases the lock at once: no lease to time out. A busy claim is not an error: it returns
nothing and bumps `wm_claims_busy_total`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, any_, func, literal, or_, select, update

from wm.db.tables import scan_units, worker_pools
from wm.telemetry import CLAIMS_BUSY


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


@contextlib.contextmanager
def claim_provider_pools(engine: Engine, provider_id: str) -> Iterator[PoolClaims]:
    """Claim every pool on this provider (current or previous) that no other replica holds."""
    with engine.connect() as conn, conn.begin():
        wanted = or_(
            worker_pools.c.provider_id == provider_id,
            literal(provider_id) == any_(worker_pools.c.previous_provider_ids),
        )
        total = conn.execute(select(func.count()).where(wanted)).scalar_one()
        claimed = conn.execute(
            select(worker_pools.c.pool_id)
            .where(wanted)
            .order_by(worker_pools.c.pool_id)
            # NO KEY UPDATE: strong enough to exclude other claimers, weak enough that inserting
            # workers (whose foreign key takes KEY SHARE on the pool) does not wait on it.
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
        yield PoolClaims(provider_id, pool_ids, conn)


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
