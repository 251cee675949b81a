import pytest

from wm.provisioning.launch_choice import ERROR_WEIGHT_FLOOR, LaunchOption, choose, error_factor


def option(lc_id, weight=1.0, per_worker=1, max_capacity=None, current=0, errors=0):
    return LaunchOption(lc_id, weight, per_worker, max_capacity, current, errors)


def split(to_add, *options):
    return {a.launch_config_id: a.workers for a in choose(to_add, options)}


@pytest.mark.parametrize(
    ("scenario", "to_add", "options", "expected"),
    [
        ("nothing to add", 0, [option("a")], {}),
        ("one config takes everything", 5, [option("a")], {"a": 5}),
        ("equal weights split evenly", 6, [option("a"), option("b")], {"a": 3, "b": 3}),
        ("weights 2:1", 9, [option("a", 2), option("b", 1)], {"a": 6, "b": 3}),
        ("weight 0 gets nothing", 4, [option("a", 0), option("b")], {"b": 4}),
        (
            "a full config gets nothing",
            4,
            [option("a", max_capacity=10, current=10), option("b")],
            {"b": 4},
        ),
        (
            "per-config max is a ceiling",
            10,
            [option("a", 100, max_capacity=3), option("b", 1)],
            {"a": 3, "b": 7},
        ),
        (
            "filling lowers the weight",
            8,
            [option("a", max_capacity=10, current=8), option("b", max_capacity=10)],
            {"a": 1, "b": 7},
        ),
        ("capacity per worker rounds up", 5, [option("a", per_worker=2)], {"a": 3}),
        ("every config full: nothing", 5, [option("a", max_capacity=1, current=1)], {}),
        (
            "room for less than one worker is no room",
            4,
            [option("a", per_worker=4, max_capacity=10, current=7), option("b")],
            {"b": 4},
        ),
        (
            "room for exactly one worker takes it",
            4,
            [option("a", per_worker=4, max_capacity=10, current=6), option("b", 0.001)],
            {"a": 1},
        ),
        ("a config of max capacity 1 takes one worker", 3, [option("a", max_capacity=1)], {"a": 1}),
        (
            "a config of max capacity 0 takes none",
            3,
            [option("a", max_capacity=0), option("b")],
            {"b": 3},
        ),
        (
            "a config of max capacity 1 next to an unlimited one",
            4,
            [option("a", 10, max_capacity=1), option("b")],
            {"a": 1, "b": 3},
        ),
        (
            "a bigger config weighs more while both are empty",
            6,
            [option("a", max_capacity=100), option("b", max_capacity=4)],
            {"a": 4, "b": 2},
        ),
        (
            "equal weight: the one with more room left gets the next worker",
            1,
            [option("a", max_capacity=10, current=5), option("b", max_capacity=10, current=2)],
            {"b": 1},
        ),
        (
            "a tie goes to the config holding less",
            1,
            [option("a", current=3), option("b", current=1), option("c", current=2)],
            {"b": 1},
        ),
        (
            "errors make a config weigh less",
            10,
            [option("a", errors=3), option("b")],
            {"a": 1, "b": 9},
        ),
    ],
)
def test_choose(scenario, to_add, options, expected):
    assert split(to_add, *options) == expected, scenario


def test_passes_of_one_worker_spread_over_equal_configs():
    # The steady state: a pass adds one worker. Each goes where the pool holds least.
    live = {"a": 0, "b": 0, "c": 0}
    for _ in range(9):
        (alloc,) = choose(1, [option(lc, current=n) for lc, n in live.items()])
        live[alloc.launch_config_id] += 1
    assert live == {"a": 3, "b": 3, "c": 3}


def test_a_failing_config_is_never_starved_completely():
    chosen = split(100, option("a", errors=50), option("b"))
    assert chosen["a"] >= 1 and chosen["b"] > 90
    assert error_factor(50) == ERROR_WEIGHT_FLOOR


def test_a_config_that_is_the_only_one_still_gets_launches_while_failing():
    assert split(3, option("a", errors=10)) == {"a": 3}


def test_allocation_reports_capacity():
    (alloc,) = choose(3, [option("a", per_worker=4)])
    assert (alloc.workers, alloc.capacity) == (1, 4)


# -- spread and probes (issue 40): off by default -------------------------------------------------


def offering_option(
    lc_id, key, weight=1.0, per_worker=1, max_capacity=None, live=0, probe=False, errors=0
):
    return LaunchOption(
        lc_id,
        weight,
        per_worker,
        max_capacity,
        live,
        errors,
        offering_key=key,
        live_spot_capacity=live,
        probe_only=probe,
    )


def spread_split(to_add, *options, spread=0.5):
    return {a.launch_config_id: a.workers for a in choose(to_add, options, spread=spread)}


@pytest.mark.parametrize(
    ("scenario", "to_add", "options", "expected"),
    [
        (
            "a heavy offering is held to half of the pass",
            10,
            [offering_option("a", "A", 10), offering_option("b", "B", 1)],
            {"a": 5, "b": 5},
        ),
        (
            "equal weights split as before",
            9,
            [offering_option("a", "A"), offering_option("b", "B"), offering_option("c", "C")],
            {"a": 3, "b": 3, "c": 3},
        ),
        (
            "two configs of one offering share its half",
            8,
            [
                offering_option("a1", "A", 10),
                offering_option("a2", "A", 10),
                offering_option("b", "B", 1),
            ],
            {"a1": 2, "a2": 2, "b": 4},
        ),
        (
            "one offering alone takes everything, as without spread",
            6,
            [offering_option("a1", "A"), offering_option("a2", "A", 3)],
            {"a1": 1, "a2": 5},  # as without spread
        ),
        (
            "no cap while the other weighs nothing",
            6,
            [offering_option("a", "A"), offering_option("b", "B", 0)],
            {"a": 6},
        ),
        (
            "no cap once the other is full",
            6,
            [offering_option("a", "A", 10), offering_option("b", "B", max_capacity=2)],
            {"a": 4, "b": 2},
        ),
        (
            "a pass of one worker goes to the heaviest",
            1,
            [offering_option("a", "A", 10), offering_option("b", "B", 1)],
            {"a": 1},
        ),
        (
            "an option naming no offering is never held, and holds others",
            10,
            [offering_option("a", "A", 10), offering_option("n", None, 1)],
            {"a": 5, "n": 5},
        ),
        (
            "an offering crowding the pool's spot gets nothing new while another has room",
            4,
            [offering_option("a", "A", 10, live=20), offering_option("b", "B", 1)],
            {"b": 4},
        ),
        (
            "a pool whose live workers crowd one offering fills the other past half the pass",
            2,
            [offering_option("a", "A", live=10), offering_option("b", "B")],
            {"b": 2},
        ),
        (
            "the pool share counts live and new together",
            10,
            [offering_option("a", "A", live=4), offering_option("b", "B")],
            {"a": 3, "b": 7},
        ),
        (
            "capacity, not workers, is shared",
            8,
            [offering_option("a", "A", per_worker=4), offering_option("b", "B", 10)],
            {"a": 1, "b": 4},
        ),
        (
            "spread 1 caps nothing",
            10,
            [offering_option("a", "A", 10), offering_option("b", "B", 1)],
            {"a": 10},  # as without spread
        ),
    ],
)
def test_spread(scenario, to_add, options, expected):
    spread = 1.0 if scenario == "spread 1 caps nothing" else 0.5
    assert spread_split(to_add, *options, spread=spread) == expected, scenario
    if "as without spread" in scenario or spread == 1.0:
        assert split(to_add, *options) == expected


@pytest.mark.parametrize(
    ("scenario", "to_add", "options", "expected"),
    [
        (
            "a probe gets one worker, the rest by weight",
            5,
            [offering_option("a", "A", 10, probe=True), offering_option("b", "B")],
            {"a": 1, "b": 4},
        ),
        (
            "a probe goes first, however light",
            1,
            [offering_option("a", "A", 0.01, probe=True), offering_option("b", "B", 10)],
            {"a": 1},
        ),
        (
            "a probe of weight 0 is no probe",
            3,
            [offering_option("a", "A", 0, probe=True), offering_option("b", "B")],
            {"b": 3},
        ),
        (
            "a probe of a full config is no probe",
            3,
            [offering_option("a", "A", max_capacity=0, probe=True), offering_option("b", "B")],
            {"b": 3},
        ),
        (
            "a probe alone gets one worker and the pass ends short",
            5,
            [offering_option("a", "A", probe=True)],
            {"a": 1},
        ),
    ],
)
def test_probe_only(scenario, to_add, options, expected):
    got = {a.launch_config_id: a.workers for a in choose(to_add, options)}
    assert got == expected, scenario
    assert spread_split(to_add, *options) == expected, scenario


def test_spread_must_be_a_share():
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ValueError, match="spread must be in"):
            choose(3, [option("a")], spread=bad)


def test_the_new_fields_at_their_defaults_choose_as_before():
    options = [
        option("a", 2, max_capacity=10, current=3, errors=1),
        option("b", 1, per_worker=2),
        option("c", 0.5, max_capacity=4),
    ]
    keyed = [
        LaunchOption(
            o.launch_config_id,
            o.weight,
            o.capacity_per_worker,
            o.max_capacity,
            o.current_capacity,
            o.recent_errors,
            offering_key=o.launch_config_id,
        )
        for o in options
    ]
    for to_add in range(0, 30):
        assert (
            choose(to_add, options) == choose(to_add, keyed) == choose(to_add, options, spread=None)
        )
