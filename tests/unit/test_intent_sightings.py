"""The first sighting of an open intent with its pool's claim free is kept, and only that."""

from datetime import UTC, datetime, timedelta

from wm.provisioning.intent_sightings import IntentSightings

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_first_free_sighting_stands_at_later_looks():
    sightings = IntentSightings()
    sightings.note("unit", free=["w1"], held=(), now=at(0))
    assert sightings.note("unit", free=["w1"], held=(), now=at(10)) == {"w1": at(0)}


def test_a_sighting_while_a_pass_holds_the_pool_proves_nothing():
    sightings = IntentSightings()
    assert sightings.note("unit", free=(), held=["w1"], now=at(0)) == {}
    assert sightings.note("unit", free=["w1"], held=(), now=at(5)) == {"w1": at(5)}


def test_an_earlier_free_sighting_survives_a_later_pass_holding_the_pool():
    sightings = IntentSightings()
    sightings.note("unit", free=["w1"], held=(), now=at(0))
    assert sightings.note("unit", free=(), held=["w1"], now=at(5)) == {"w1": at(0)}


def test_intents_no_longer_open_are_forgotten_and_keys_kept_apart():
    sightings = IntentSightings()
    sightings.note("a", free=["w1", "w2"], held=(), now=at(0))
    sightings.note("b", free=["w3"], held=(), now=at(0))
    assert sightings.note("a", free=["w2"], held=(), now=at(5)) == {"w2": at(0)}
    assert sightings.note("a", free=["w1"], held=(), now=at(9)) == {"w1": at(9)}
    assert sightings.note("b", free=["w3"], held=(), now=at(9)) == {"w3": at(0)}
