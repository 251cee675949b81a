"""`wm import`'s decisions: which providers may be imported, how legacy definitions are judged,
which workers become rows under which launch config, and what the operator reads."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wm.model import WorkerState
from wm.pools.apply_plan import plan_apply
from wm.take_over.import_plan import (
    CHANGED,
    NEW,
    UNCHANGED,
    LegacyPool,
    LegacyWorker,
    PoolSummary,
    ProviderFacts,
    WorkersPlan,
    chosen_pools,
    parse_legacy_pools,
    plan_workers,
    pool_summaries,
    provider_problems,
    summary_lines,
)
from wm.take_over.marks import IMPORTED_FROM

ROOT = "https://tc.example.com"
PROVIDERS = {
    "legacy-aws": ProviderFacts("aws", adopt_legacy=True, regions=("us-east-1", "us-west-2")),
    "plain-aws": ProviderFacts("aws", adopt_legacy=False, regions=("us-east-1",)),
    "hand": ProviderFacts("static", adopt_legacy=False, regions=()),
}
POOL = "proj/linux"
CREATED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
MODIFIED = datetime(2026, 12, 1, 10, 5, tzinfo=UTC)
EXPIRES = datetime(2026, 12, 8, 10, 0, tzinfo=UTC)


def lc(image: str, region: str = "us-east-1", lc_id: str | None = None, capacity: int = 1):
    manager: dict[str, Any] = {"capacityPerInstance": capacity}
    if lc_id is not None:
        manager["launchConfigId"] = lc_id
    return {
        "region": region,
        "launchConfig": {"ImageId": image, "InstanceType": "m5.large"},
        "workerManager": manager,
    }


def pool(pool_id: str = POOL, provider: str = "legacy-aws", *lcs: dict, **config: Any):
    body = {
        "providerId": provider,
        "description": "linux",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {"minCapacity": 0, "maxCapacity": 4, "launchConfigs": list(lcs), **config}
        if provider != "hand"
        else {"workerConfig": {}},
    }
    return LegacyPool(pool_id, provider, copy.deepcopy(body))


def worker(
    worker_id: str = "i-1",
    state: str = "running",
    group: str = "us-east-1",
    lc_id: str | None = "lc-a",
    pool_id: str = POOL,
    provider: str = "legacy-aws",
    capacity: int = 1,
) -> LegacyWorker:
    return LegacyWorker(
        worker_pool_id=pool_id,
        worker_group=group,
        worker_id=worker_id,
        provider_id=provider,
        state=state,
        capacity=capacity,
        launch_config_id=lc_id,
        created=CREATED,
        expires=EXPIRES,
        last_modified=MODIFIED,
    )


def definitions(*pools: LegacyPool):
    parsed, problems = parse_legacy_pools(list(pools), PROVIDERS)
    assert problems == []
    return parsed


@pytest.mark.parametrize(
    ("scenario", "chosen", "problem"),
    [
        ("a provider with adopt_legacy", ["legacy-aws"], None),
        ("a static provider needs no adopt_legacy", ["hand"], None),
        (
            "a provider wm's config does not have",
            ["aws"],
            "--provider aws: wm's config has no provider 'aws' (configured: hand, legacy-aws, "
            "plain-aws)",
        ),
        (
            "a cloud provider without adopt_legacy",
            ["plain-aws"],
            "--provider plain-aws: providers.plain-aws.adopt_legacy is not true in wm's config: "
            "its scans would never adopt the imported workers' VMs",
        ),
    ],
)
def test_which_providers_may_be_imported(scenario, chosen, problem):
    assert provider_problems(chosen, PROVIDERS) == ([problem] if problem else [])


def test_pools_of_other_providers_are_not_taken():
    pools = [pool("proj/b"), pool("proj/other", "plain-aws", lc("x")), pool("proj/a")]
    assert [p.worker_pool_id for p in chosen_pools(pools, ["legacy-aws"])] == ["proj/a", "proj/b"]


@pytest.mark.parametrize(
    ("scenario", "legacy", "problem"),
    [
        (
            "a launch config breaking the provider's schema",
            pool(POOL, "legacy-aws", {"launchConfig": {"ImageId": "a"}}),
            f"pool {POOL}: config.launchConfigs[0]",
        ),
        (
            "a worker group no scanner of the provider covers",
            pool(POOL, "legacy-aws", lc("a", region="eu-west-1")),
            f"pool {POOL}: config.launchConfigs[0]: worker group 'eu-west-1' is not one of",
        ),
        (
            "a bad owner",
            LegacyPool(POOL, "legacy-aws", {**pool().body, "owner": "nobody"}),
            f"pool {POOL}: owner",
        ),
    ],
)
def test_a_bad_legacy_definition_is_named_by_pool_and_key_path(scenario, legacy, problem):
    parsed, problems = parse_legacy_pools([legacy], PROVIDERS)
    assert parsed == []
    assert len(problems) >= 1 and problems[0].startswith(problem), problems


def test_a_running_worker_becomes_a_row_under_its_launch_config():
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a")))
    plan = plan_workers(ROOT, [worker()], defs, PROVIDERS, set())
    assert plan.problems == () and plan.known == ()
    (row,) = plan.adopt
    assert row.worker_id == f"{POOL}/us-east-1/i-1"
    assert (row.tc_worker_id, row.provider_id, row.launch_config_id) == (
        "i-1",
        "legacy-aws",
        "lc-a",
    )
    assert row.state is WorkerState.RUNNING
    assert (row.created, row.last_modified, row.expires) == (CREATED, MODIFIED, EXPIRES)
    assert row.registered_at == MODIFIED  # lastModified: registration was its last change
    assert row.provider_data == {IMPORTED_FROM: ROOT}


@pytest.mark.parametrize(
    ("scenario", "legacy_state", "state", "registered_at"),
    [
        ("requested: not registered yet", "requested", WorkerState.REQUESTED, None),
        ("running", "running", WorkerState.RUNNING, MODIFIED),
        ("stopping: being removed", "stopping", WorkerState.STOPPING, None),
    ],
)
def test_each_live_state_is_kept(scenario, legacy_state, state, registered_at):
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a")))
    (row,) = plan_workers(ROOT, [worker(state=legacy_state)], defs, PROVIDERS, set()).adopt
    assert (row.state, row.registered_at) == (state, registered_at)


@pytest.mark.parametrize(
    ("scenario", "legacy_state", "lifecycle", "expires"),
    [
        # worker-manager's `expires` is its row's retention (a week after launch); the
        # registration deadline is launch + registration timeout (its providerData).
        (
            "requested, the pool's registration timeout",
            "requested",
            {"registrationTimeout": 1800},
            CREATED + timedelta(seconds=1800),
        ),
        (
            "requested, no registration timeout: the reregistration timeout (4 days)",
            "requested",
            {},
            CREATED + timedelta(days=4),
        ),
        (
            "requested, a row expiring before its deadline",
            "requested",
            {"registrationTimeout": 20 * 86400, "reregistrationTimeout": 25 * 86400},
            EXPIRES,
        ),
        ("running: the row's expiry, later than registration + 4 days", "running", {}, EXPIRES),
        (
            "running: registration + a reregistration timeout later than the row's expiry",
            "running",
            {"reregistrationTimeout": 20 * 86400},
            MODIFIED + timedelta(days=20),
        ),
        ("stopping", "stopping", {"registrationTimeout": 1800}, EXPIRES),
    ],
)
def test_which_deadline_an_imported_worker_gets(scenario, legacy_state, lifecycle, expires):
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a"), lifecycle=lifecycle))
    (row,) = plan_workers(ROOT, [worker(state=legacy_state)], defs, PROVIDERS, set()).adopt
    assert row.expires == expires


def test_stopped_workers_and_workers_of_pools_not_imported_are_left_out():
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a")))
    workers = [worker("i-1", state="stopped"), worker("i-2", pool_id="proj/elsewhere")]
    assert plan_workers(ROOT, workers, defs, PROVIDERS, set()) == WorkersPlan()


def test_a_worker_wm_has_a_row_for_is_known_not_written_again():
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a")))
    plan = plan_workers(
        ROOT, [worker("i-1"), worker("i-2")], defs, PROVIDERS, {f"{POOL}/us-east-1/i-1"}
    )
    assert [w.tc_worker_id for w in plan.adopt] == ["i-2"]
    assert [w.tc_worker_id for w in plan.known] == ["i-1"]


@pytest.mark.parametrize(
    ("scenario", "launch_configs", "given", "capacity", "resolved", "problem"),
    [
        ("the worker's launchConfigId", [lc("a", lc_id="lc-a")], "lc-a", 1, "lc-a", None),
        (
            "no launchConfigId: the pool's one launch config of its worker group",
            [lc("a", lc_id="lc-a"), lc("b", region="us-west-2", lc_id="lc-b")],
            None,
            1,
            "lc-a",
            None,
        ),
        (
            "no launchConfigId: several in the group, one of the worker's capacity",
            [lc("a", lc_id="lc-a"), lc("b", lc_id="lc-b", capacity=4)],
            None,
            4,
            "lc-b",
            None,
        ),
        (
            "no launchConfigId: several in the group of the same capacity",
            [lc("a", lc_id="lc-a"), lc("b", lc_id="lc-b")],
            None,
            1,
            None,
            "2 of the pool's launch configs have that worker group and capacity",
        ),
        (
            "no launchConfigId and none in its worker group",
            [lc("b", region="us-west-2", lc_id="lc-b")],
            None,
            1,
            None,
            "the pool has no launch config in that worker group",
        ),
        (
            "a launchConfigId the definition no longer has (archived)",
            [lc("b", lc_id="lc-b")],
            "lc-a",
            1,
            None,
            "its launchConfigId 'lc-a' is not one of the pool's launch configs (lc-b)",
        ),
    ],
)
def test_which_launch_config_a_worker_is_filed_under(
    scenario, launch_configs, given, capacity, resolved, problem
):
    defs = definitions(pool(POOL, "legacy-aws", *launch_configs))
    plan = plan_workers(ROOT, [worker(lc_id=given, capacity=capacity)], defs, PROVIDERS, set())
    if resolved:
        assert [w.launch_config_id for w in plan.adopt] == [resolved]
        assert plan.problems == ()
    else:
        assert plan.adopt == ()
        (text,) = plan.problems
        assert text.startswith(f"worker {POOL}/us-east-1/i-1: ") and problem in text


def test_a_derived_launch_config_id_is_worker_managers():
    # Without workerManager.launchConfigId, both derive `lc-` + md5 of the jsonb text.
    defs = definitions(pool(POOL, "legacy-aws", lc("a")))
    derived = defs[0].launch_configs[0].launch_config_id
    assert derived.startswith("lc-")
    plan = plan_workers(ROOT, [worker(lc_id=derived)], defs, PROVIDERS, set())
    assert [w.launch_config_id for w in plan.adopt] == [derived]


def test_static_workers_are_left_with_their_pool_imported():
    defs = definitions(pool("proj/rack", "hand"))
    legacy = worker("box-1", group="rack", lc_id=None, pool_id="proj/rack", provider="hand")
    plan = plan_workers(ROOT, [legacy], defs, PROVIDERS, set())
    assert (plan.adopt, plan.problems) == ((), ())
    assert plan.left == (legacy,)


def test_the_summary_says_per_pool_what_changes_and_counts_workers():
    old = definitions(pool("proj/a", "legacy-aws", lc("a", lc_id="lc-a")))
    held = plan_apply(old, [], [])
    held_pools, held_lcs = list(held.create_pools), list(held.create_launch_configs)
    now = definitions(
        pool("proj/a", "legacy-aws", lc("a", lc_id="lc-a")),
        pool("proj/b", "legacy-aws", lc("b", lc_id="lc-b")),
        pool("proj/rack", "hand"),
    )
    changed = definitions(pool("proj/a", "legacy-aws", lc("a", lc_id="lc-a"), lc("c")))
    workers = [
        worker("i-1", pool_id="proj/a"),
        worker("i-2", pool_id="proj/a", state="requested"),
        worker("i-3", pool_id="proj/b", lc_id="lc-b"),
        worker("box", group="rack", lc_id=None, pool_id="proj/rack", provider="hand"),
    ]
    plan = plan_workers(ROOT, workers, now, PROVIDERS, {"proj/a/us-east-1/i-1"})
    summaries = pool_summaries(now, held_pools, plan_apply(now, held_pools, held_lcs), plan)
    assert [(s.pool_id, s.verdict) for s in summaries] == [
        ("proj/a", UNCHANGED),
        ("proj/b", NEW),
        ("proj/rack", NEW),
    ]
    assert summary_lines(summaries) == [
        "pool proj/a (legacy-aws): unchanged; workers new: requested 1; already known: running 1",
        "pool proj/b (legacy-aws): new; workers new: running 1; already known: none",
        "pool proj/rack (hand): new; workers new: none; already known: none; static workers "
        "left: 1 (rack/box): worker-manager keeps their staticSecret; make each again with "
        "createWorker",
        "3 pools: 2 new, 0 changed, 1 unchanged; workers: 2 new, 1 already known, 1 static left",
    ]
    again = pool_summaries(changed, held_pools, plan_apply(changed, held_pools, held_lcs), plan)
    assert [(s.pool_id, s.verdict) for s in again] == [("proj/a", CHANGED)]


def test_every_bad_pool_is_named_and_the_good_ones_still_parse():
    # Each kind of problem both before and after the other, and a good pool last.
    region_a = pool("proj/a", "legacy-aws", lc("a", region="eu-west-1"))
    schema_b = pool("proj/b", "legacy-aws", {"launchConfig": {"ImageId": "b"}})
    region_c = pool("proj/c", "legacy-aws", lc("c", region="eu-west-1"))
    good = pool("proj/d", "legacy-aws", lc("d"))
    parsed, problems = parse_legacy_pools([region_a, schema_b, region_c, good], PROVIDERS)
    assert [d.worker_pool_id for d in parsed] == ["proj/d"]
    assert sorted({p.split(":")[0] for p in problems}) == [
        "pool proj/a",
        "pool proj/b",
        "pool proj/c",
    ]


def test_workers_left_out_or_unresolved_do_not_end_the_plan():
    # Sorted by pool, group and id: each worker that is skipped comes before one to adopt.
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a")), pool("proj/rack", "hand"))
    workers = [
        worker("i-1", state="stopped"),
        worker("i-2", lc_id="lc-gone"),
        worker("i-3", lc_id="lc-gone"),
        worker("i-4"),
        worker("box-1", group="rack", lc_id=None, pool_id="proj/rack", provider="hand"),
        worker("box-2", group="rack", lc_id=None, pool_id="proj/rack", provider="hand"),
    ]
    plan = plan_workers(ROOT, workers, defs, PROVIDERS, set())
    assert [w.tc_worker_id for w in plan.adopt] == ["i-4"]
    assert [w.worker_id for w in plan.left] == ["box-1", "box-2"]
    assert [p.split(":")[0] for p in plan.problems] == [
        f"worker {POOL}/us-east-1/i-2",
        f"worker {POOL}/us-east-1/i-3",
    ]


def test_a_config_without_providers_says_none_are_configured():
    assert provider_problems(["aws"], {}) == [
        "--provider aws: wm's config has no provider 'aws' (configured: none)"
    ]


@pytest.mark.parametrize(
    ("scenario", "launch_configs", "listed"),
    [
        ("the pool has others", [lc("b", lc_id="lc-b"), lc("c", lc_id="lc-c")], "lc-b, lc-c"),
        ("the pool has none left", [], "none"),
    ],
)
def test_an_archived_launch_config_is_named_with_what_the_pool_has(
    scenario, launch_configs, listed
):
    defs = definitions(pool(POOL, "legacy-aws", *launch_configs))
    plan = plan_workers(ROOT, [worker(lc_id="lc-a")], defs, PROVIDERS, set())
    assert plan.problems == (
        f"worker {POOL}/us-east-1/i-1: its launchConfigId 'lc-a' is not one of the pool's "
        f"launch configs ({listed}); worker-manager archived it, and wm cannot know what it "
        "launched",
    ), scenario


def test_a_worker_without_launch_config_and_none_in_its_group_is_named():
    defs = definitions(pool(POOL, "legacy-aws", lc("b", region="us-west-2", lc_id="lc-b")))
    plan = plan_workers(ROOT, [worker(lc_id=None)], defs, PROVIDERS, set())
    assert plan.problems == (
        f"worker {POOL}/us-east-1/i-1: no launchConfigId given and the pool has no launch "
        "config in that worker group; import it after it stops",
    )


def test_the_one_launch_config_of_a_group_takes_its_worker_whatever_its_capacity():
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a", capacity=1)))
    (row,) = plan_workers(ROOT, [worker(lc_id=None, capacity=4)], defs, PROVIDERS, set()).adopt
    assert (row.launch_config_id, row.worker_group, row.capacity) == ("lc-a", "us-east-1", 4)


@pytest.mark.parametrize(
    ("scenario", "legacy_state", "expires"),
    [
        (
            "running: registration + the reregistration timeout (4 days)",
            "running",
            MODIFIED + timedelta(days=4),
        ),
        ("requested: launch + the registration timeout", "requested", CREATED + timedelta(hours=1)),
    ],
)
def test_a_worker_without_an_expiry_gets_its_deadline_from_the_pool(
    scenario, legacy_state, expires
):
    defs = definitions(
        pool(POOL, "legacy-aws", lc("a", lc_id="lc-a"), lifecycle={"registrationTimeout": 3600})
    )
    legacy = LegacyWorker(**{**worker(state=legacy_state).__dict__, "expires": None})
    (row,) = plan_workers(ROOT, [legacy], defs, PROVIDERS, set()).adopt
    assert row.expires == expires, scenario


def test_the_summary_counts_each_state_and_names_every_static_worker_left():
    summaries = [
        PoolSummary(
            "proj/a",
            "legacy-aws",
            CHANGED,
            new_workers={"requested": 1, "running": 2},
            known_workers={"running": 3},
        ),
        PoolSummary("proj/rack", "hand", UNCHANGED, left_workers=("rack/b1", "rack/b2")),
    ]
    assert summary_lines(summaries) == [
        "pool proj/a (legacy-aws): changed; workers new: requested 1, running 2; already known: "
        "running 3",
        "pool proj/rack (hand): unchanged; workers new: none; already known: none; static "
        "workers left: 2 (rack/b1, rack/b2): worker-manager keeps their staticSecret; make each "
        "again with createWorker",
        "2 pools: 0 new, 1 changed, 1 unchanged; workers: 3 new, 3 already known, 2 static left",
    ]


def test_the_summary_counts_the_workers_of_each_state_in_a_pool():
    defs = definitions(pool(POOL, "legacy-aws", lc("a", lc_id="lc-a")))
    workers = [worker("i-1"), worker("i-2"), worker("i-3", state="requested")]
    plan = plan_workers(ROOT, workers, defs, PROVIDERS, set())
    (summary,) = pool_summaries(defs, [], plan_apply(defs, [], []), plan)
    assert summary.new_workers == {"requested": 1, "running": 2}
