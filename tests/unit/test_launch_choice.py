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
            "errors make a config weigh less",
            10,
            [option("a", errors=3), option("b")],
            {"a": 1, "b": 9},
        ),
    ],
)
def test_choose(scenario, to_add, options, expected):
    assert split(to_add, *options) == expected, scenario


def test_a_failing_config_is_never_starved_completely():
    chosen = split(100, option("a", errors=50), option("b"))
    assert chosen["a"] >= 1 and chosen["b"] > 90
    assert error_factor(50) == ERROR_WEIGHT_FLOOR


def test_a_config_that_is_the_only_one_still_gets_launches_while_failing():
    assert split(3, option("a", errors=10)) == {"a": 3}


def test_allocation_reports_capacity():
    (alloc,) = choose(3, [option("a", per_worker=4)])
    assert (alloc.workers, alloc.capacity) == (1, 4)
