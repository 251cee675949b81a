"""A live worker-manager deployment moves onto wm one provider at a time, Azure first, while
tasks keep arriving (issue 27, "Done when" 1 and 2).

The deployment is the stand-in of wmsim/legacy (a real HTTP service speaking worker-manager's
API, its provisioner making VMs with worker-manager's own tags on the three simulated clouds,
simulated worker-runners holding credentials signed by the deployment's worker-manager client)
behind a Taskcluster ingress; wm runs as its real processes (`wm run web`, `provisioner`,
`scanner`, `wm import`) with that same client. tests/support/take_over_move.py follows the
runbook and measures while it runs.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support.take_over_move import KIND, MAX_CAPACITY, POOL, Move, wait_for

pytestmark = pytest.mark.slow


def started_everywhere(move: Move) -> bool:
    """Every pool of the stand-in has workers running tasks."""
    running = {w.worker_pool_id for w in move.legacy.manager.workers(state="running")}
    return running == set(POOL.values()) and all(move.completed().get(p) for p in POOL.values())


def live_imported(move: Move, provider_id: str) -> set[str]:
    return {
        worker_id
        for worker_id, row in move.imported().items()
        if row["provider_id"] == provider_id and row["state"] in ("requested", "running")
    }


def drain(move: Move) -> None:
    move.stop_feeding()
    wait_for(move.every_task_completed, "every task submitted completed")
    wait_for(
        move.drained,
        "every worker idled out and removed, with its VM and resources",
        shown=move.leftovers,
    )


def assert_kept_through_the_move(move: Move, provider_ids: list[str]) -> dict[str, Any]:
    """The figures, and what holds for every provider moved: its workers were imported, renewed
    at wm on their own credentials, never refused nor told to go; nothing over a maximum, no
    task lost, nothing leaked, the stand-in's pools answered the same through the rootUrl."""
    figures = move.figures()
    print(json.dumps(figures, indent=2, sort_keys=True))
    imported = move.imported()
    agents = move.legacy_agents()
    moved_pools = {POOL[p] for p in provider_ids}
    for provider_id in provider_ids:
        mine = [r for r in imported.values() if r["provider_id"] == provider_id]
        assert mine, f"no worker of {provider_id} imported"
        renewed = [
            w
            for w, r in imported.items()
            if r["provider_id"] == provider_id and w in move.renewed_at_wm
        ]
        assert renewed, f"no imported {provider_id} worker renewed at wm"
    kept = {name: agent for name, agent in agents.items() if name in imported}
    assert kept, "no agent of an imported worker"
    assert move.refused() == {}
    # No worker got a 4xx from either side, nor through it (but a worker the stand-in launched
    # after the import's read, registering before the second import took it: none so far).
    refusing = {s: n for s, n in figures["agent_answers"].items() if 400 <= s < 500}
    assert sum(refusing.values()) == figures["late_registrations_refused"], refusing
    assert move.scaled_down_while_feeding() == []
    assert move.over_capacity == [], f"capacity above {MAX_CAPACITY}: {move.over_capacity[:5]}"
    assert move.samples > 20
    assert set(move.capacity_peaks) >= moved_pools
    assert move.every_task_completed()
    assert move.live_vms() == {"aws": [], "gcp": [], "azure": []}
    differing = [c for c in move.comparisons if not c.same]
    assert differing == [], differing[:3]
    return figures


def test_azure_moves_to_wm_while_tasks_keep_arriving_and_nothing_is_lost(
    tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm
):
    started = time.monotonic()
    with Move.start(tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm) as move:
        wait_for(lambda: started_everywhere(move), "the legacy fleet running tasks in every pool")
        move.compare()

        move.take_over_provider("azure2")

        wait_for(
            lambda: any(r["renewed"] for r in move.imported().values()),
            "an imported Azure worker renewed its credentials at wm",
        )
        move.compare()
        calls_at_import = len(move.legacy.manager.deployment.calls)
        # A lull in Azure: some imported workers are told to go; then tasks come back faster
        # than the pool's maximum takes them, and wm launches beside the adopted ones left.
        adopted = live_imported(move, "azure2")
        move.slow_down(POOL["azure2"], 1.0)
        wait_for(
            lambda: 0 < len(live_imported(move, "azure2")) < len(adopted),
            "an imported Azure worker gone in the lull, another still running",
        )
        move.full_speed(POOL["azure2"])
        wait_for(
            lambda: (
                move.fleet is not None
                and any("task-done" in a.events for a in move.fleet.agents.values())
            ),
            "a worker wm launched in the Azure pool running tasks",
        )
        drain(move)
        figures = assert_kept_through_the_move(move, ["azure2"])
        calls = move.legacy.manager.deployment.calls[calls_at_import:]

    # Nothing of the moved provider reaches the stand-in after the import; its other pools do.
    assert [c for c in calls if c[1] and c[1].startswith("worker/azure2/")] == []
    assert any(c[1] and c[1].startswith("worker/aws/") for c in calls)
    phases = {c.phase for c in move.comparisons}
    assert {"legacy", "azure2: rootUrl at wm", "azure2: removed from the stand-in"} <= phases
    before = {c.pool_id.split()[-1] for c in move.comparisons if c.phase == "azure2: rootUrl at wm"}
    after = {c.pool_id.split()[-1] for c in move.comparisons if c.phase.endswith("stand-in")}
    assert before == set(POOL.values())  # Azure too, forwarded until it is imported
    assert after == {POOL["aws"], POOL["fxci-level1-gcp"]}
    assert figures["wm_launched"] > 0
    print(f"took {time.monotonic() - started:.1f}s; {figures['comparisons']} comparisons")


def test_the_remaining_providers_move_then_forwarding_is_turned_off(
    tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm
):
    started = time.monotonic()
    with Move.start(tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm) as move:
        wait_for(lambda: started_everywhere(move), "the legacy fleet running tasks in every pool")
        for provider_id in ("azure2", "aws", "fxci-level1-gcp"):
            move.take_over_provider(provider_id)
            wait_for(
                lambda p=provider_id: any(
                    r["renewed"] for r in move.imported().values() if r["provider_id"] == p
                ),
                f"an imported {provider_id} worker renewed its credentials at wm",
            )

        move.forwarding_off()
        routed = len(move.ingress.routed)
        done = sum(move.completed().values())
        wait_for(
            lambda: (
                len(move.ingress.routed) > routed + 20 and sum(move.completed().values()) > done
            ),
            "workers calling wm and tasks completing with forwarding off",
        )
        client = move.client(move.ingress.root_url)
        pools = {
            p["workerPoolId"]: p["providerId"] for p in client.listWorkerPools()["workerPools"]
        }
        providers = {p["providerId"] for p in client.listProviders()["providers"]}
        drain(move)
        figures = assert_kept_through_the_move(move, ["azure2", "aws", "fxci-level1-gcp"])
        late_calls = move.legacy.manager.deployment.calls[move.switched_at_call :]

    assert pools == {pool_id: provider_id for provider_id, pool_id in POOL.items()}
    assert providers == set(KIND)
    assert late_calls == []  # nothing reached the stand-in once forwarding was off
    print(f"took {time.monotonic() - started:.1f}s; {figures['tasks_completed']} tasks")
