"""What the launch choice knows of offerings, in Postgres so that every provisioner, scanner and
replica reads the same and a restarted process starts warm: the clouds' signals (written by the
scanners' signal jobs), the bench of offerings that refused capacity, and wm's own evidence per
launch config, computed from the workers table in one statement (issue 40; research §8(b))."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, and_, any_, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import insert

from wm.db.arrays import ids_param
from wm.db.engine import one_statement
from wm.db.tables import offering_bench, offering_signals, workers
from wm.errors import ErrorCategory
from wm.model import Offering, OfferingSignal, SignalKind, WorkerState
from wm.provisioning.cost_choice import Evidence, PoolFacts
from wm.provisioning.offering_bench import BenchState

OFFERING_KEY = ("provider_id", "region", "zone", "instance_type", "market")

# Half-lives of wm's own evidence (research §8(b)): create outcomes 30 min (availability),
# pre-emptions and running hours 24 h (the pre-emption rate), launch -> registered 6 h.
CREATES_HALF_LIFE_S = 1800.0
PREEMPTION_HALF_LIFE_S = 24 * 3600.0
REGISTRATION_HALF_LIFE_S = 6 * 3600.0
# Rows older than this weigh under 1 % at the longest half-life and are not read at all.
EVIDENCE_WINDOW_S = 7 * 24 * 3600.0


def _zone_column(zone: str | None) -> str:
    return zone or ""


def _offering(row: Mapping[str, object]) -> Offering:
    return Offering(
        region=str(row["region"]),
        zone=str(row["zone"]) or None,
        instance_type=str(row["instance_type"]),
        market=str(row["market"]),
    )


def _key(provider_id: str, offering: Offering) -> dict[str, str]:
    return {
        "provider_id": provider_id,
        "region": offering.region,
        "zone": _zone_column(offering.zone),
        "instance_type": offering.instance_type,
        "market": offering.market,
    }


def write_signals(engine: Engine, signals: Sequence[OfferingSignal], fresh_for_s: float) -> None:
    """Upsert the signals, one row per (provider, offering, kind): the newest value wins, and
    is read for `fresh_for_s` after it was observed. A signal older than the one held is
    ignored (two collectors racing, or a replayed batch)."""
    if not signals:
        return
    fresh_for = timedelta(seconds=fresh_for_s)
    rows: dict[tuple[str, ...], dict[str, object]] = {}
    for signal in signals:
        row = {
            **_key(signal.provider_id, signal.offering),
            "kind": str(signal.kind),
            "value": signal.value,
            "source": signal.source,
            "observed_at": signal.observed_at,
            "fresh_until": signal.observed_at + fresh_for,
        }
        key = tuple(str(row[c]) for c in (*OFFERING_KEY, "kind"))
        held = rows.get(key)
        # One statement may not touch a row twice (ON CONFLICT would refuse the batch).
        if held is None or held["observed_at"] <= signal.observed_at:  # type: ignore[operator]
            rows[key] = row
    statement = insert(offering_signals).values(list(rows.values()))
    statement = statement.on_conflict_do_update(
        index_elements=[*OFFERING_KEY, "kind"],
        set_={
            "value": statement.excluded.value,
            "source": statement.excluded.source,
            "observed_at": statement.excluded.observed_at,
            "fresh_until": statement.excluded.fresh_until,
        },
        where=offering_signals.c.observed_at <= statement.excluded.observed_at,
    )
    with one_statement(engine) as conn:
        conn.execute(statement)


_READ_SIGNALS = select(offering_signals).where(
    offering_signals.c.provider_id == bindparam("provider_id"),
    offering_signals.c.fresh_until > func.now(),
)


def read_signals(
    engine: Engine, provider_id: str
) -> dict[tuple[Offering, SignalKind], OfferingSignal]:
    """Every signal held for the provider's offerings that is still fresh, by offering and
    kind: one past its time (its source down or not asked for a while) is as unknown."""
    found: dict[tuple[Offering, SignalKind], OfferingSignal] = {}
    with one_statement(engine) as conn:
        for row in conn.execute(_READ_SIGNALS, {"provider_id": provider_id}).mappings():
            try:
                kind = SignalKind(row["kind"])
            except ValueError:
                continue  # written by a newer wm: not this one's to read
            offering = _offering(row)
            found[(offering, kind)] = OfferingSignal(
                provider_id=provider_id,
                offering=offering,
                kind=kind,
                value=float(row["value"]),
                source=str(row["source"]),
                observed_at=row["observed_at"],
            )
    return found


@dataclass(frozen=True)
class BenchEntry:
    """An offering's bench row: its state (epoch seconds, as the pure bench takes it) and the
    refusal that put it there."""

    state: BenchState
    last_code: str | None = None


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _moment(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


_READ_BENCH = select(offering_bench).where(offering_bench.c.provider_id == bindparam("provider_id"))


def read_bench(engine: Engine, provider_id: str) -> dict[Offering, BenchEntry]:
    """The bench rows of the provider's offerings (an offering without one is open)."""
    with one_statement(engine) as conn:
        rows = conn.execute(_READ_BENCH, {"provider_id": provider_id}).mappings().all()
    return {
        _offering(row): BenchEntry(
            BenchState(
                failures=int(row["failures"]),
                benched_until=_epoch(row["benched_until"]),
                probe_sent_at=_epoch(row["probe_sent_at"]),
            ),
            row["last_code"],
        )
        for row in rows
    }


def write_bench(engine: Engine, provider_id: str, entries: Mapping[Offering, BenchEntry]) -> None:
    """Set the offerings' bench rows to these states, in one statement. A state back to
    nothing (a success) deletes its row: an open offering needs none."""
    if not entries:
        return
    keep = {o: e for o, e in entries.items() if e.state != BenchState()}
    cleared = [o for o in entries if o not in keep]
    with engine.begin() as conn:
        if keep:
            statement = insert(offering_bench).values(
                [
                    {
                        **_key(provider_id, offering),
                        "failures": entry.state.failures,
                        "benched_until": _moment(entry.state.benched_until),
                        "probe_sent_at": _moment(entry.state.probe_sent_at),
                        "last_code": entry.last_code,
                    }
                    for offering, entry in sorted(keep.items(), key=lambda item: item[0].key)
                ]
            )
            statement = statement.on_conflict_do_update(
                index_elements=list(OFFERING_KEY),
                set_={
                    "failures": statement.excluded.failures,
                    "benched_until": statement.excluded.benched_until,
                    "probe_sent_at": statement.excluded.probe_sent_at,
                    "last_code": statement.excluded.last_code,
                    "updated_at": text("now()"),
                },
            )
            conn.execute(statement)
        for offering in sorted(cleared, key=lambda o: o.key):
            conn.execute(
                offering_bench.delete().where(
                    and_(
                        *(offering_bench.c[k] == v for k, v in _key(provider_id, offering).items())
                    )
                )
            )


# wm's own evidence per launch config and per pool, in one statement over the pools' workers
# of the window: GROUPING SETS gives a row per (pool, launch config) and one per pool (its
# launch_config_id NULL). Each count is decayed by the age of the moment it counts.
_EVIDENCE = text(
    """
WITH w AS (
    SELECT w.pool_id, w.launch_config_id, w.accepted_at, w.preempted_at, w.stopped_at,
           w.created, w.launch_refused,
           CASE WHEN p.requires_registration THEN w.registered_at ELSE w.cloud_running_at END
               AS ready_at,
           coalesce(w.registered_at, w.cloud_running_at, w.accepted_at) AS up_at,
           now() AS at
    FROM workers w JOIN worker_pools p ON p.pool_id = w.pool_id
    WHERE w.pool_id = ANY(:pool_ids)
      AND (w.state <> :stopped OR w.last_modified > now() - make_interval(secs => :window_s))
)
SELECT pool_id, launch_config_id, GROUPING(launch_config_id) AS whole_pool,
    coalesce(sum(power(0.5, extract(epoch FROM at - accepted_at) / :creates_hl))
        FILTER (WHERE accepted_at IS NOT NULL), 0) AS creates_ok,
    coalesce(sum(power(0.5, extract(epoch FROM at - created) / :creates_hl))
        FILTER (WHERE launch_refused = :capacity), 0) AS capacity_failures,
    coalesce(sum(power(0.5, extract(epoch FROM at - preempted_at) / :preempt_hl))
        FILTER (WHERE preempted_at IS NOT NULL), 0) AS preempted,
    coalesce(sum(
        extract(epoch FROM coalesce(preempted_at, stopped_at, at) - up_at) / 3600.0
        * power(0.5, extract(epoch FROM at - coalesce(preempted_at, stopped_at, at)) / :preempt_hl)
    ) FILTER (WHERE up_at IS NOT NULL), 0) AS running_hours,
    coalesce(sum(power(0.5, extract(epoch FROM at - accepted_at) / :ready_hl))
        FILTER (WHERE accepted_at IS NOT NULL
                AND (ready_at IS NOT NULL OR stopped_at IS NOT NULL)), 0) AS launched,
    coalesce(sum(power(0.5, extract(epoch FROM at - accepted_at) / :ready_hl))
        FILTER (WHERE accepted_at IS NOT NULL AND ready_at IS NOT NULL), 0) AS registered,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ready_at - accepted_at))
        FILTER (WHERE ready_at >= accepted_at
                AND ready_at > at - make_interval(secs => :ready_window_s)) AS median_ready_s,
    avg(extract(epoch FROM stopped_at - up_at))
        FILTER (WHERE stopped_at IS NOT NULL AND up_at IS NOT NULL
                AND stopped_at > at - make_interval(secs => :window_s))
        AS mean_lifetime_s
FROM w
GROUP BY GROUPING SETS ((pool_id, launch_config_id), (pool_id))
"""
).bindparams(ids_param("pool_ids"))


@dataclass(frozen=True)
class EvidenceReading:
    configs: dict[tuple[str, str], Evidence]  # (pool id, launch config id) -> its evidence
    pools: dict[str, PoolFacts]


def read_evidence(engine: Engine, pool_ids: Sequence[str], speed: float = 1.0) -> EvidenceReading:
    """wm's own evidence for the pools' launch configs, and each pool's facts, decayed by the
    database's clock, in one statement. A launch config without workers in the window has
    none (Evidence()). `speed`: the clouds' seconds a real second (the half-lives and windows
    are the clouds' time; [launch_choice] clock_speed)."""
    configs: dict[tuple[str, str], Evidence] = {}
    pools: dict[str, PoolFacts] = {}
    if not pool_ids:
        return EvidenceReading(configs, pools)
    parameters = {
        "pool_ids": list(pool_ids),
        "stopped": str(WorkerState.STOPPED),
        "window_s": EVIDENCE_WINDOW_S / speed,
        "creates_hl": CREATES_HALF_LIFE_S / speed,
        "preempt_hl": PREEMPTION_HALF_LIFE_S / speed,
        "ready_hl": REGISTRATION_HALF_LIFE_S / speed,
        "ready_window_s": REGISTRATION_HALF_LIFE_S / speed,
        # refused at once (judge_results) or failed late (the scan: launch_failures)
        "capacity": str(ErrorCategory.CAPACITY),
    }
    with one_statement(engine) as conn:
        for row in conn.execute(_EVIDENCE, parameters).mappings():
            if row["whole_pool"]:
                lifetime = row["mean_lifetime_s"]
                pools[row["pool_id"]] = PoolFacts(
                    mean_lifetime_s=None if lifetime is None else float(lifetime)
                )
                continue
            ready = row["median_ready_s"]
            configs[(row["pool_id"], row["launch_config_id"])] = Evidence(
                creates_ok=float(row["creates_ok"]),
                capacity_failures=float(row["capacity_failures"]),
                preempted=float(row["preempted"]),
                running_hours=max(0.0, float(row["running_hours"])),
                launched=float(row["launched"]),
                registered=float(row["registered"]),
                median_ready_s=None if ready is None else float(ready),
            )
    return EvidenceReading(configs, pools)


def evidence(engine: Engine, pool_ids: Sequence[str]) -> dict[tuple[str, str], Evidence]:
    """wm's own evidence per (pool, launch config) (read_evidence's first half)."""
    return read_evidence(engine, pool_ids).configs


_RUNNING = (
    select(workers.c.pool_id, workers.c.launch_config_id, func.count())
    .where(
        workers.c.pool_id == any_(ids_param("pool_ids")),
        workers.c.state == bindparam("running"),
    )
    .group_by(workers.c.pool_id, workers.c.launch_config_id)
)


def running_workers(engine: Engine, pool_ids: Sequence[str]) -> dict[tuple[str, str], int]:
    """Running workers per (pool, launch config): what the pools' cost per hour counts."""
    if not pool_ids:
        return {}
    with one_statement(engine) as conn:
        rows = conn.execute(
            _RUNNING, {"pool_ids": list(pool_ids), "running": str(WorkerState.RUNNING)}
        )
        return {(pool_id, lc_id): int(n) for pool_id, lc_id, n in rows}
