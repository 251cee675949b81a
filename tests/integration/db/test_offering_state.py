"""What the launch choice keeps in Postgres: the clouds' signals (the newest value wins), the
bench of offerings (a success deletes the row), and wm's own evidence per launch config read
from the workers table in one statement, decayed by age."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select, text

from tests.support.configs import build, raw
from tests.support.definitions import apply_pools
from wm.db import offering_state
from wm.db import pools as pool_store
from wm.db.offering_state import BenchEntry
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker
from wm.model import Offering, OfferingSignal, SignalKind
from wm.provisioning.offering_bench import BenchState

POOL = "proj/linux"
EAST_A = Offering("us-east-1", "us-east-1a", "m5.large", "spot")
EAST = Offering("us-east-1", None, "m5.large", "spot")


HOUR_S = 3600.0


def db_now(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(select(func.now())).scalar_one().astimezone(UTC)


def price(offering: Offering, value: float, at: datetime, provider: str = "aws-a"):
    return OfferingSignal(provider, offering, SignalKind.PRICE, value, "test", at)


def test_the_newest_signal_of_an_offering_wins_and_an_older_one_is_ignored(engine):
    now = db_now(engine)
    offering_state.write_signals(engine, [price(EAST_A, 0.05, now), price(EAST, 0.07, now)], HOUR_S)
    offering_state.write_signals(engine, [price(EAST_A, 0.04, now + timedelta(minutes=5))], HOUR_S)
    offering_state.write_signals(engine, [price(EAST_A, 0.09, now - timedelta(minutes=5))], HOUR_S)
    offering_state.write_signals(engine, [price(EAST_A, 1.0, now, provider="aws-b")], HOUR_S)

    found = offering_state.read_signals(engine, "aws-a")

    assert {key: s.value for key, s in found.items()} == {
        (EAST_A, SignalKind.PRICE): 0.04,
        (EAST, SignalKind.PRICE): 0.07,  # zone None round-trips
    }


def test_on_a_faster_clock_the_evidence_decays_faster(engine, launch_configs):
    # A capacity refusal a minute ago: a whole failure less a little at the clouds' 30-min
    # half-life; a quarter on a market 60 times faster (two of its half-lives).
    _, second = launch_configs
    add_worker(engine, second, refused="capacity")

    real = offering_state.read_evidence(engine, [POOL]).configs[(POOL, second)]
    fast = offering_state.read_evidence(engine, [POOL], speed=60.0).configs[(POOL, second)]

    assert real.capacity_failures == pytest.approx(0.5 ** (1 / 30), abs=0.01)
    assert fast.capacity_failures == pytest.approx(0.25, abs=0.01)


def test_a_signal_past_its_freshness_is_not_read(engine):
    # Scenario: the price source read two offerings, one three hours ago and one just now;
    # what it reads is good for an hour (its source has been down since the older read).
    now = db_now(engine)
    offering_state.write_signals(engine, [price(EAST_A, 0.05, now - timedelta(hours=3))], HOUR_S)
    offering_state.write_signals(engine, [price(EAST, 0.07, now)], HOUR_S)

    found = offering_state.read_signals(engine, "aws-a")

    # Outcome: the stale price is as unknown; the fresh one is read.
    assert {key: s.value for key, s in found.items()} == {(EAST, SignalKind.PRICE): 0.07}


def test_a_benched_offering_is_read_back_and_a_success_deletes_its_row(engine):
    benched = BenchEntry(BenchState(2, 1_900_000_000.0, 1_899_999_000.5), "InsufficientCapacity")
    offering_state.write_bench(engine, "aws-a", {EAST_A: benched, EAST: benched})
    assert offering_state.read_bench(engine, "aws-a") == {EAST_A: benched, EAST: benched}
    assert offering_state.read_bench(engine, "aws-b") == {}

    offering_state.write_bench(engine, "aws-a", {EAST_A: BenchEntry(BenchState())})

    assert offering_state.read_bench(engine, "aws-a") == {EAST: benched}


@pytest.fixture
def launch_configs(engine) -> list[str]:
    data = raw()
    apply_pools(engine, build(data), data["pools"])
    return sorted(
        lc.launch_config_id
        for lc in pool_store.load_launch_configs(engine, pool_ids=[POOL])
        if lc.pool_id == POOL
    )


def add_worker(engine, lc_id: str, **moments: timedelta | str) -> None:
    """A worker of the launch config whose moments are these ages before the database's now
    (a string: the class of the refusal that ended its launch)."""
    worker_id = "w" + uuid.uuid4().hex[:14]
    insert_intents(
        engine,
        [
            NewWorker(
                worker_id, POOL, "us-east-1", "aws-a", 1, lc_id, str(uuid.uuid4()), "b", 0, 900.0
            )
        ],
    )
    refused = moments.pop("refused", None)
    sets = ", ".join(f"{name} = now() - :{name}" for name in moments)
    values = dict(moments, worker_id=worker_id, refused=refused)
    with engine.begin() as conn:
        conn.execute(
            text(
                f"UPDATE workers SET {sets + ', ' if sets else ''}launch_refused = :refused, "
                "created = now() - interval '1 minute' WHERE worker_id = :worker_id"
            ),
            values,
        )


def test_evidence_counts_each_launch_config_decayed_by_age_in_one_read(engine, launch_configs):
    first, second = launch_configs
    minutes = lambda m: timedelta(minutes=m)  # noqa: E731
    # Accepted 30 min ago (half weight at the 30-min half-life), registered 2 min later,
    # running since: 28 min of running hours.
    add_worker(engine, first, accepted_at=minutes(30), registered_at=minutes(28))
    # Pre-empted 24 h ago after an hour's run: half a pre-emption, half an hour.
    add_worker(
        engine,
        first,
        accepted_at=minutes(25 * 60 + 2),
        registered_at=minutes(25 * 60),
        preempted_at=minutes(24 * 60),
        stopped_at=minutes(24 * 60),
    )
    # Refused for want of capacity a minute ago (created then): nearly a whole failure.
    add_worker(engine, second, refused="capacity")
    add_worker(engine, second, refused="quota")

    reading = offering_state.read_evidence(engine, [POOL])

    one = reading.configs[(POOL, first)]
    assert one.creates_ok == pytest.approx(0.5 + 0.5 ** ((25 * 60 + 2) / 30), abs=0.01)
    assert one.preempted == pytest.approx(0.5, abs=0.01)
    assert one.running_hours == pytest.approx(28 / 60 + 0.5, abs=0.01)
    assert one.launched == pytest.approx(one.registered)  # both registered
    assert one.median_ready_s == pytest.approx(120.0, abs=1)  # the old one is past 6 h
    two = reading.configs[(POOL, second)]
    assert two.capacity_failures == pytest.approx(0.5 ** (1 / 30), abs=0.01)
    assert (two.creates_ok, two.preempted, two.median_ready_s) == (0.0, 0.0, None)
    assert reading.pools[POOL].mean_lifetime_s == pytest.approx(3600.0, abs=1)
    assert offering_state.evidence(engine, ["proj/gce"]) == {}
