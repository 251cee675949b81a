"""What a pass's creates do to the bench (cost_planning.bench_after), and how a pool's scores
become launch options: tables, no database."""

from __future__ import annotations

from wm.config.launch_choice import ChoiceMode, PoolChoice
from wm.db.offering_state import BenchEntry
from wm.errors import ON_DEMAND, SPOT, CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchSpec, Offering
from wm.provisioning import cost_planning
from wm.provisioning.cost_planning import CreateOutcome, PoolScore
from wm.provisioning.launch_choice import LaunchOption
from wm.provisioning.offering_bench import Admission, BenchState

NOW = 1_800_000_000.0
A = Offering("us-east-1", "us-east-1a", "m5.large", SPOT)
B = Offering("us-east-1", "us-east-1b", "m5.large", SPOT)
C = Offering("us-east-1", "us-east-1a", "c5.large", SPOT)
OD = Offering("us-east-1", None, "m5.large", ON_DEMAND)
SPEC = LaunchSpec("lc", "us-east-1", 1)
OPEN = BenchEntry(BenchState())


def refusal(code: str, category: ErrorCategory = ErrorCategory.CAPACITY) -> CloudError:
    return CloudError("aws", category, code, "no")


def scope_of(scopes: dict[str, ErrorScope]):
    return lambda error, spec: scopes.get(error.code)


def ice(zone: str, *, hint: tuple[str, ...] = ()) -> ErrorScope:
    return ErrorScope(ErrorCategory.CAPACITY, "us-east-1", zone, "m5.large", None, SPOT, hint)


def test_a_capacity_refusal_benches_its_offering_once_however_many_workers_met_it():
    outcomes = [CreateOutcome(A, SPEC, False, refusal("ICE"))] * 3
    changed = cost_planning.bench_after(
        {}, {A, B, C}, [], outcomes, scope_of({"ICE": ice("us-east-1a")}), NOW
    )
    assert changed == {A: BenchEntry(BenchState(1, NOW + 180.0), "ICE")}


def test_a_zone_the_refusal_names_as_having_capacity_is_reopened():
    benched_b = BenchEntry(BenchState(2, NOW + 100), "ICE")
    outcomes = [CreateOutcome(A, SPEC, False, refusal("ICE"))]
    scope = ice("us-east-1a", hint=("us-east-1b",))
    changed = cost_planning.bench_after(
        {B: benched_b}, {A, B}, [], outcomes, scope_of({"ICE": scope}), NOW
    )
    assert changed[B] == OPEN
    assert changed[A].state.failures == 1


def test_a_success_clears_its_offering_even_beside_a_refusal_in_the_same_pass():
    benched = BenchEntry(BenchState(3, NOW - 5, NOW - 1), "ICE")
    outcomes = [
        CreateOutcome(A, SPEC, True),
        CreateOutcome(A, SPEC, False, refusal("ICE")),
    ]
    changed = cost_planning.bench_after(
        {A: benched}, {A}, [A], outcomes, scope_of({"ICE": ice("us-east-1a")}), NOW
    )
    assert changed == {A: OPEN}


def test_a_spot_quota_for_the_region_benches_every_spot_offering_there_and_not_on_demand():
    spot_quota = ErrorScope(ErrorCategory.QUOTA, "us-east-1", market=SPOT)
    outcomes = [CreateOutcome(A, SPEC, False, refusal("MaxSpot", ErrorCategory.QUOTA))]
    changed = cost_planning.bench_after(
        {}, {A, B, C, OD}, [], outcomes, scope_of({"MaxSpot": spot_quota}), NOW
    )
    assert set(changed) == {A, B, C}
    assert {e.state.benched_until for e in changed.values()} == {NOW + 600.0}


def test_a_family_quota_benches_only_the_type_that_met_it():
    family = ErrorScope(ErrorCategory.QUOTA, "us-east-1", family="Standard", market=SPOT)
    outcomes = [CreateOutcome(A, SPEC, False, refusal("VcpuLimitExceeded", ErrorCategory.QUOTA))]
    changed = cost_planning.bench_after(
        {}, {A, B, C}, [], outcomes, scope_of({"VcpuLimitExceeded": family}), NOW
    )
    assert set(changed) == {A, B}


def test_other_failures_and_a_probe_without_an_answer_leave_only_the_probe_marked():
    benched = BenchEntry(BenchState(1, NOW - 10), "ICE")
    outcomes = [CreateOutcome(A, SPEC, False, refusal("Boom", ErrorCategory.TRANSIENT))]
    changed = cost_planning.bench_after({A: benched}, {A}, [A], outcomes, scope_of({}), NOW)
    assert changed == {A: BenchEntry(BenchState(1, NOW - 10, NOW), "ICE")}


def test_a_refused_probe_benches_for_the_doubled_ttl():
    benched = BenchEntry(BenchState(1, NOW - 10), "ICE")
    outcomes = [CreateOutcome(A, SPEC, False, refusal("ICE"))]
    changed = cost_planning.bench_after(
        {A: benched}, {A}, [A], outcomes, scope_of({"ICE": ice("us-east-1a")}), NOW
    )
    assert changed == {A: BenchEntry(BenchState(2, NOW + 360.0), "ICE")}


def test_in_cost_mode_scores_replace_weights_and_a_probe_is_one_worker_only():
    from wm.provisioning.cost_choice import Scored

    def scored(lc_id: str, admission: Admission, final: float) -> Scored:
        return Scored(lc_id, admission, final, final, 1.0, None, None, 0.0, None, 1.0, ())

    score = PoolScore(
        PoolChoice(ChoiceMode.COST, 3.0, 0.5),
        (scored("a", Admission.PROBE, 0.2), scored("od", Admission.OPEN, 0.7)),
        {"a": A, "od": OD},
    )
    options = [
        LaunchOption("a", 1.0, 1, None, 4, recent_errors=3),
        LaunchOption("od", 1.0, 1, None, 2, recent_errors=1),
    ]
    a, od = score.options(options, {"a": 4, "od": 2})
    assert (a.weight, a.recent_errors, a.probe_only, a.offering_key) == (0.2, 0, True, A.key)
    assert a.live_spot_capacity == 4
    assert (od.weight, od.probe_only, od.live_spot_capacity) == (0.7, False, 0)


def test_a_pools_cost_per_hour_is_its_running_workers_at_the_prices_held():
    from datetime import UTC, datetime

    from prometheus_client import REGISTRY

    from wm.model import LaunchConfigRecord, OfferingSignal, SignalKind

    at = datetime.now(UTC)
    configs = [
        LaunchConfigRecord("pool/cost", "a", "us-east-1", 1, 1.0, None),
        LaunchConfigRecord("pool/cost", "b", "us-east-1", 1, 1.0, None),
        LaunchConfigRecord("pool/cost", "od", "us-east-1", 1, 1.0, None),
    ]
    offerings = {"a": A, "b": B, "od": OD}
    # A region's price holds for its zones; the on-demand offering has none held.
    signals = {
        (A, SignalKind.PRICE): OfferingSignal("aws", A, SignalKind.PRICE, 0.05, "t", at),
        (Offering("us-east-1", None, "m5.large", SPOT), SignalKind.PRICE): OfferingSignal(
            "aws", B, SignalKind.PRICE, 0.07, "t", at
        ),
    }
    cost = cost_planning.export_cost(
        "pool/cost",
        configs,
        lambda lc: offerings[lc.launch_config_id],
        signals,
        {"a": 3, "b": 2, "od": 5},
    )
    assert cost == 3 * 0.05 + 2 * 0.07
    assert REGISTRY.get_sample_value("wm_pool_cost_per_hour", {"pool": "pool/cost"}) == cost
