"""The worker-manager baseline (bench/baselines/worker_manager_selector.py) against Taskcluster's
own tests, `services/worker-manager/test/launch_config_selector_test.js` at 9d59eb59 (cited by
test name), then the AWS pass and the starvation guard, which Taskcluster's file does not test."""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from bench.baselines.worker_manager_selector import (
    MIN_WEIGHT,
    AwsPass,
    CreateAttempt,
    FiledError,
    LaunchConfig,
    Pool,
    PoolError,
    PoolStats,
    WeightedRandomConfig,
    aws_provision,
    for_worker_pool,
    lodash_shuffle,
    recent_error_counts,
    weigh,
    weighted_draw,
)

# The Taskcluster test file's pool maxCapacity.
MAX = 1000


def lc(lc_id, weight=1, max_capacity=None, wm_cpi=None, cpi=1, archived=False):
    """genAwsLaunchConfig: workerManager keys, and a top-level capacityPerInstance of 1."""
    return LaunchConfig(lc_id, weight, max_capacity, wm_cpi, cpi, archived)


def pool(*configs, max_capacity=MAX):
    return Pool(max_capacity, tuple(configs))


def stats(capacity=None, errors=None):
    return PoolStats(capacity or {}, errors or {})


def debug(configs):
    """What launch-config-selector-debug logs: weights and remaining capacity by id."""
    return (
        {c.launch_config.launch_config_id: c.weight for c in configs},
        {c.launch_config.launch_config_id: c.remaining_capacity for c in configs},
    )


def counts(chosen):
    return dict(Counter(c.launch_config_id for c in chosen))


def rng(seed=40):
    return random.Random(seed)


# --- Taskcluster's cases: what forWorkerPool weighs (its assertDebugMessage) ------------------


@pytest.mark.parametrize(
    ("test_name", "pool_", "stats_", "weights", "remaining"),
    [
        (
            "equal weights launch configs",
            pool(lc("lc1"), lc("lc2")),
            None,
            {"lc1": 1, "lc2": 1},
            {"lc1": MAX, "lc2": MAX},
        ),
        (
            "zero weights launch configs will not be used",
            pool(lc("lc1"), lc("lc2", weight=0)),
            None,
            {"lc1": 1, "lc2": 0},
            {"lc1": MAX, "lc2": MAX},
        ),
        (
            "respects weights in random selection",
            pool(lc("lc1"), lc("lc2", 0.5), lc("lc3", 0.1)),
            None,
            {"lc1": 1, "lc2": 0.5, "lc3": 0.1},
            {"lc1": MAX, "lc2": MAX, "lc3": MAX},
        ),
        (
            "using workerPoolStats to respect maxCapacity per LC",
            pool(
                lc("lc1", max_capacity=10), lc("lc2", max_capacity=10), lc("lc3", max_capacity=10)
            ),
            stats(capacity={"lc1": 10, "lc2": 5, "lc3": 10}),
            {"lc1": 0, "lc2": 0.5, "lc3": 0},
            {"lc1": 0, "lc2": 5, "lc3": 0},
        ),
        (
            "using workerPoolStats to respect errors by LC",
            pool(lc("lc1"), lc("lc2")),
            stats(errors={"lc1": 25}),
            {"lc1": 0, "lc2": 1},
            {"lc1": MAX, "lc2": MAX},
        ),
        (
            "select capacity should respect individual max capacity",
            pool(lc("lc1", max_capacity=1), lc("lc2", max_capacity=2), lc("lc3")),
            stats(),
            {"lc1": 1, "lc2": 1, "lc3": 1},
            {"lc1": 1, "lc2": 2, "lc3": MAX},
        ),
        (
            "single LC with negative weight due to errors still provisions when it has capacity",
            # 60 % of capacity used and half of the pool's 100 errors: 1 - 0.6 - 0.5 < 0.
            pool(lc("lc1", max_capacity=100)),
            stats(capacity={"lc1": 60}, errors={"lc1": 50, None: 50}),
            {"lc1": MIN_WEIGHT},
            {"lc1": 40},
        ),
    ],
)
def test_taskcluster_cases_weigh_as_worker_manager_logs(
    test_name, pool_, stats_, weights, remaining
):
    assert debug(weigh(pool_, stats_)) == (weights, remaining), test_name


# --- Taskcluster's cases: what the selector then offers and draws -----------------------------


def all_ids(wrc, _rng):
    return [c.launch_config_id for c in wrc.get_all()]


def all_and_total(wrc, _rng):
    return all_ids(wrc, _rng), wrc.total_weight


def draw_id(wrc, r):
    return wrc.get_random_config(r).launch_config.launch_config_id


def select(*sizes):
    """selectCapacity on the same selector, one call per size: how many configs each returns."""

    def action(wrc, r):
        return [len(wrc.select_capacity(size, r)) for size in sizes]

    return action


def distribution(size):
    return lambda wrc, r: counts(wrc.select_capacity(size, r))


def single_lc_provisions(wrc, r):
    chosen = wrc.select_capacity(10, r)
    return len(wrc.get_all()), wrc.total_weight > 0, len(chosen), chosen[0].launch_config_id


@pytest.mark.parametrize(
    ("test_name", "pool_", "stats_", "action", "outcome"),
    [
        ("missing launch configs", pool(), None, all_ids, []),
        (
            "equal weights launch configs",
            pool(lc("lc1"), lc("lc2")),
            None,
            all_and_total,
            (["lc1", "lc2"], 2),
        ),
        (
            "zero weights launch configs will not be used",
            pool(lc("lc1"), lc("lc2", weight=0)),
            None,
            all_and_total,
            (["lc1"], 1),
        ),
        (
            "zero weights launch configs will not be used (draw)",
            pool(lc("lc1"), lc("lc2", weight=0)),
            None,
            draw_id,
            "lc1",
        ),
        ("selectCapacity", pool(lc("lc1"), lc("lc2"), lc("lc3")), None, select(5, 15), [5, 15]),
        ("selectCapacity with special case", pool(lc("lc1", wm_cpi=2)), None, select(5), [3]),
        (
            "selectCapacity with wm.capacityPerInstance > 1",
            pool(lc("lc1", wm_cpi=3), lc("lc2", wm_cpi=3)),
            None,
            select(6),
            [2],
        ),
        (
            "selectCapacity with capacityPerInstance > 1 (old format)",
            pool(lc("lc1", cpi=3), lc("lc2", cpi=3)),
            None,
            select(6),
            [2],
        ),
        (
            "using workerPoolStats to respect maxCapacity per LC",
            pool(
                lc("lc1", max_capacity=10), lc("lc2", max_capacity=10), lc("lc3", max_capacity=10)
            ),
            stats(capacity={"lc1": 10, "lc2": 5, "lc3": 10}),
            distribution(5),
            {"lc2": 5},
        ),
        (
            "using workerPoolStats to respect errors by LC",
            pool(lc("lc1"), lc("lc2")),
            stats(errors={"lc1": 25}),
            distribution(100),
            {"lc2": 100},
        ),
        (
            "select capacity should respect individual max capacity",
            pool(lc("lc1", max_capacity=1), lc("lc2", max_capacity=2), lc("lc3")),
            stats(),
            distribution(100),
            {"lc1": 1, "lc2": 2, "lc3": 97},
        ),
        (
            "select capacity should consider capacityPerInstance",
            pool(lc("lc1", wm_cpi=5), lc("lc2", wm_cpi=5)),
            stats(),
            select(5, 25),
            [1, 5],
        ),
        (
            "single LC with negative weight due to errors still provisions when it has capacity",
            pool(lc("lc1", max_capacity=100)),
            stats(capacity={"lc1": 60}, errors={"lc1": 50, None: 50}),
            single_lc_provisions,
            (1, True, 10, "lc1"),
        ),
    ],
)
def test_taskcluster_cases_select_as_worker_manager_selects(
    test_name, pool_, stats_, action, outcome
):
    assert action(for_worker_pool(pool_, stats_), rng()) == outcome, test_name


def test_respects_weights_in_random_selection_500_draws():
    """Taskcluster's 'respects weights in random selection': over 500 draws lc1 beats lc2 beats
    lc3, and every draw names a config."""
    chosen = counts(
        for_worker_pool(pool(lc("lc1"), lc("lc2", 0.5), lc("lc3", 0.1)), None).select_capacity(
            500, rng()
        )
    )
    assert chosen["lc1"] > chosen["lc2"] > chosen["lc3"]
    assert sum(chosen.values()) == 500


def test_draws_follow_the_weights_within_five_standard_deviations():
    """The same property measured: with room to spare each draw is an independent pick with
    p = weight / total, so a config's count over N draws is Binomial(N, p); the bound is five of
    its standard deviations (a fair selector falls outside it about once in 1.7 million)."""
    weights = {"lc1": 1, "lc2": 0.5, "lc3": 0.1}
    draws = 20_000
    configs = [lc(i, w) for i, w in weights.items()]
    chosen = counts(
        for_worker_pool(pool(*configs, max_capacity=10**9), None).select_capacity(draws, rng())
    )
    total = sum(weights.values())
    for lc_id, weight in weights.items():
        p = weight / total
        tolerance = 5 * math.sqrt(draws * p * (1 - p))
        assert abs(chosen[lc_id] - draws * p) <= tolerance, (lc_id, chosen[lc_id], draws * p)


def test_a_seed_fixes_every_draw():
    """Runs are deterministic: the same seed draws the same configs in the same order."""
    p = pool(lc("a"), lc("b", 0.3), lc("c", 2))

    def run(seed):
        return [c.launch_config_id for c in weighted_draw(p, None, 50, random.Random(seed))]

    assert run(7) == run(7)
    assert run(7) != run(8)


# --- Details of forWorkerPool the Taskcluster file leaves untested ----------------------------


@pytest.mark.parametrize(
    ("scenario", "pool_", "stats_", "weights", "remaining"),
    [
        (
            "initialWeight defaults to 1, maxCapacity to the pool's",
            pool(LaunchConfig("a")),
            stats(),
            {"a": 1},
            {"a": MAX},
        ),
        (
            "an archived config is not loaded",
            pool(lc("a"), lc("b", archived=True)),
            stats(),
            {"a": 1},
            {"a": MAX},
        ),
        (
            "configs are weighed in id order, whatever the definition's order",
            pool(lc("b"), lc("a")),
            stats(),
            {"a": 1, "b": 1},
            {"a": MAX, "b": MAX},
        ),
        (
            "existing capacity lowers the weight by its share of the config's max",
            pool(lc("a", max_capacity=40), lc("b")),
            stats(capacity={"a": 10, "b": 250}),
            {"a": 0.75, "b": 0.75},
            {"a": 30, "b": 750},
        ),
        (
            "a config over its max is negative with no room, and the guard leaves it",
            pool(lc("a", max_capacity=10), lc("b")),
            stats(capacity={"a": 12}),
            {"a": 1 - 1.2, "b": 1},
            {"a": 0, "b": MAX},
        ),
        (
            "a config's maxCapacity 0 keeps weight 1 and no room",
            pool(lc("a", max_capacity=0), lc("b")),
            stats(),
            {"a": 1, "b": 1},
            {"a": 0, "b": MAX},
        ),
        (
            "a config's maxCapacity 0 with workers: nothing lowers it either",
            pool(lc("a", max_capacity=0), lc("b")),
            stats(capacity={"a": 2}),
            {"a": 1, "b": 1},
            {"a": 0, "b": MAX},
        ),
        (
            "every kind counts, and id-less errors dilute a config's share",
            pool(lc("a"), lc("b")),
            stats(errors={"a": 1, None: 3}),
            {"a": 0.75, "b": 1},
            {"a": MAX, "b": MAX},
        ),
        (
            "id-less errors alone demote nobody",
            pool(lc("a"), lc("b")),
            stats(errors={None: 9}),
            {"a": 1, "b": 1},
            {"a": MAX, "b": MAX},
        ),
        (
            "one error in one config of a healthy pool takes its weight to 0",
            pool(lc("a"), lc("b")),
            stats(errors={"a": 1}),
            {"a": 0, "b": 1},
            {"a": MAX, "b": MAX},
        ),
        (
            "capacity and errors both count",
            pool(lc("a", max_capacity=10), lc("b", max_capacity=10)),
            stats(capacity={"a": 5}, errors={"a": 1, "b": 3}),
            {"a": 0.25, "b": 0.25},
            {"a": 5, "b": 10},
        ),
    ],
)
def test_weights_beyond_the_taskcluster_file(scenario, pool_, stats_, weights, remaining):
    assert debug(weigh(pool_, stats_)) == (weights, remaining), scenario


def test_a_config_without_room_is_still_drawn_once():
    """maxCapacity 0 gives no room but keeps weight 1 (existing is 0, so nothing lowers it):
    selectCapacity draws it once before removing it, as worker-manager does."""
    chosen = weighted_draw(pool(lc("a", max_capacity=0)), stats(), 5, rng())
    assert counts(chosen) == {"a": 1}


@pytest.mark.parametrize(
    ("scenario", "errors", "outcome"),
    [
        ("an error of the last hour counts", [(59, "a")], {"a": 1}),
        ("one exactly an hour old does not", [(60, "a")], {}),
        (
            "every kind counts, id-less ones under None",
            [(1, "a", "creation-error"), (2, "a", "operation-error"), (3, None, "worker-error")],
            {"a": 2, None: 1},
        ),
    ],
)
def test_errors_of_the_last_hour(scenario, errors, outcome):
    now = datetime(2026, 8, 21, 12, tzinfo=UTC)
    rows = [PoolError(now - timedelta(minutes=m), lc_id, *kind) for m, lc_id, *kind in errors]
    assert recent_error_counts(rows, now) == outcome, scenario


# --- The starvation guard ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "pool_", "stats_", "weights"),
    [
        (
            "the only config with room gets MIN_WEIGHT",
            pool(lc("a")),
            stats(errors={"a": 2}),
            {"a": MIN_WEIGHT},
        ),
        (
            "another config with room and weight: 0, not MIN_WEIGHT",
            pool(lc("a"), lc("b")),
            stats(errors={"a": 2}),
            {"a": 0, "b": 1},
        ),
        (
            "another with weight but no room does not count: MIN_WEIGHT",
            pool(lc("a"), lc("b", max_capacity=0)),
            stats(errors={"a": 2}),
            {"a": MIN_WEIGHT, "b": 1},
        ),
        (
            "two starved configs: the first by id gets MIN_WEIGHT, the second sees it and gets 0",
            pool(lc("b", weight=0), lc("a", weight=0)),
            stats(),
            {"a": MIN_WEIGHT, "b": 0},
        ),
        (
            "initialWeight 0 alone in its pool launches at MIN_WEIGHT once stats are given",
            pool(lc("a", weight=0)),
            stats(),
            {"a": MIN_WEIGHT},
        ),
        (
            "guarded in id order: a later starved config is set to 0, not left negative",
            pool(lc("a", weight=0), lc("b", max_capacity=10)),
            stats(capacity={"b": 5}, errors={"b": 1}),
            {"a": MIN_WEIGHT, "b": 0},
        ),
        ("without stats there is no guard", pool(lc("a", weight=0)), None, {"a": 0}),
        (
            "a config without room is left negative",
            pool(lc("a", max_capacity=10)),
            stats(capacity={"a": 15}),
            {"a": 1 - 1.5},
        ),
    ],
)
def test_starvation_guard(scenario, pool_, stats_, weights):
    assert debug(weigh(pool_, stats_))[0] == weights, scenario


# --- AWS's provisioning pass ------------------------------------------------------------------


def cloud(failing=()):
    """A RunInstances that fails for the given config ids and records every call."""
    calls = []

    def run_instances(config, instances):
        calls.append((config.launch_config_id, instances))
        return config.launch_config_id not in failing

    return run_instances, calls


def aws_pass(pool_, to_spawn, failing=(), seed=40):
    run_instances, _ = cloud(failing)
    return aws_provision(pool_, stats(), to_spawn, random.Random(seed), run_instances)


def shuffled_ids(pool_, seed=40):
    """The order AWS tries the configs in, for the same seed."""
    wrc = for_worker_pool(pool_, stats())
    return [c.launch_config_id for c in lodash_shuffle(wrc.get_all(), random.Random(seed))]


def ok(lc_id, n):
    return CreateAttempt(lc_id, n, True)


@pytest.mark.parametrize(
    ("scenario", "pool_", "to_spawn", "shares"),
    [
        ("weights 0.3 and 1.0 get an even split", pool(lc("a", 0.3), lc("b", 1.0)), 10, [5, 5]),
        ("weight 0 takes no part", pool(lc("a", 0), lc("b"), lc("c")), 10, [5, 5]),
        (
            "3 configs, 10 to spawn: 4 each, the last the rest",
            pool(lc("a"), lc("b"), lc("c")),
            10,
            [4, 4, 2],
        ),
        ("capacity per instance rounds the count up", pool(lc("a", wm_cpi=4)), 10, [3]),
        (
            "rounding up overshoots a share, and the next config takes only what is left",
            pool(lc("a", wm_cpi=4), lc("b", wm_cpi=4)),
            10,
            [2, 1],
        ),
        ("nothing to spawn: no call", pool(lc("a")), 0, []),
        ("no config: no call", pool(), 5, []),
    ],
)
def test_aws_splits_evenly_whatever_the_weights(scenario, pool_, to_spawn, shares):
    """aws.js: the configs with weight > 0 shuffled, ceil(toSpawn / n) each in that order, a
    config's count rounded up to whole instances. `shares` are instance counts in that order."""
    order = shuffled_ids(pool_) if to_spawn else []
    expected = tuple(ok(i, n) for i, n in zip(order, shares, strict=True))
    assert aws_pass(pool_, to_spawn) == AwsPass(expected, None), scenario


def test_the_first_failed_create_ends_the_pass_and_is_filed_without_its_config():
    """One dry config: the configs shuffled after it get no call this pass, and the error names
    no config, so next pass its weight is untouched."""
    p = pool(lc("a"), lc("b"), lc("c"))
    order = shuffled_ids(p)
    dry = order[1]
    run_instances, calls = cloud(failing={dry})

    result = aws_provision(p, stats(), 9, random.Random(40), run_instances)

    assert calls == [(order[0], 3), (dry, 3)]
    assert result == AwsPass(
        (ok(order[0], 3), CreateAttempt(dry, 3, False)), FiledError("creation-error", None)
    )
    next_stats = stats(errors={result.error.launch_config_id: 1})
    assert debug(weigh(p, next_stats))[0] == {"a": 1, "b": 1, "c": 1}


def test_a_failure_first_in_order_launches_nothing():
    p = pool(lc("a"), lc("b"))
    first = shuffled_ids(p)[0]
    result = aws_pass(p, 4, failing={first})
    assert result == AwsPass((CreateAttempt(first, 2, False),), FiledError("creation-error", None))


def test_aws_order_changes_with_the_seed_and_covers_every_order():
    """_.shuffle is uniform: over many seeds, each of 3 configs leads about a third of passes."""
    p = pool(lc("a"), lc("b"), lc("c"))
    passes = 3_000
    leaders = Counter(shuffled_ids(p, seed)[0] for seed in range(passes))
    p_lead = 1 / 3
    tolerance = 5 * math.sqrt(passes * p_lead * (1 - p_lead))
    assert set(leaders) == {"a", "b", "c"}
    assert all(abs(n - passes * p_lead) <= tolerance for n in leaders.values()), leaders


@pytest.mark.parametrize(
    ("scenario", "make"),
    [
        ("capacityPerInstance 0", lambda: LaunchConfig("x", wm_capacity_per_instance=0)),
        ("negative to_spawn", lambda: weighted_draw(pool(lc("a")), None, -1, rng())),
    ],
)
def test_bad_input_is_refused_by_name(scenario, make):
    with pytest.raises(ValueError, match=r"capacity_per_instance|to_spawn"):
        make()


def test_an_empty_selector_draws_nothing():
    assert WeightedRandomConfig().select_capacity(5, rng()) == []


class FixedRandom(random.Random):
    """Returns the given numbers in turn, as Math.random() would in a replayed run."""

    def __init__(self, *values):
        super().__init__(0)
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


@pytest.mark.parametrize(
    ("scenario", "value", "drawn"),
    [
        # Walked ascending by weight: lc3 0.1, lc2 0.5, lc1 1 (total 1.6).
        ("the lightest config holds the bottom of the range", 0.05, "lc3"),
        ("a point on a boundary belongs to the next config", 0.1 / 1.6, "lc2"),
        ("the heaviest holds the top", 0.99, "lc1"),
    ],
)
def test_a_draw_walks_the_configs_lightest_first(scenario, value, drawn):
    """getRandomConfig: random * totalWeight against cumulative weights, sorted ascending."""
    wrc = for_worker_pool(pool(lc("lc1"), lc("lc2", 0.5), lc("lc3", 0.1)), None)
    assert draw_id(wrc, FixedRandom(value)) == drawn, scenario


def test_a_used_up_config_leaves_the_draw_with_its_weight():
    """#removeConfig lowers totalWeight too: once 'a' has used its one slot, the next number is
    scaled to b + c alone (0.4 x 2 = 0.8 falls in b), not to the old total (1.2 would be c)."""
    wrc = for_worker_pool(pool(lc("a", max_capacity=1), lc("b"), lc("c")), stats())
    chosen = wrc.select_capacity(2, FixedRandom(0.1, 0.4))
    assert [c.launch_config_id for c in chosen] == ["a", "b"]
    assert wrc.total_weight == 2
