"""The take-over's figures in the demo's report (`wmsim demo --take-over`), pure.

What issue 27 asks of a move, measured on the run: pools and workers `wm import` took; imported
workers refused at re-registration or told to terminate (they must keep running through the
move: 0); tasks lost (every task submitted completed: 0); capacity above a pool's maximum at
any sample, both sides' workers counted once each (0); VMs and other resources left in the
clouds after the drain (0); requests the legacy worker-manager answered through wm's
forwarding, and whether the answers sampled through the forwarding equalled its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wm.api.routers.workers import SCALE_DOWN_REASON
from wmsim.agent import Refusal

REFUSED = ("register-refused:", "reregister-refused:")
TOLD_TO_TERMINATE = "told-to-terminate:"
# wm scaling an idle worker down (its pool has more capacity than its queue needs) is wm
# managing the pool, as worker-manager would, not the worker refused for having moved.
SCALED_DOWN = TOLD_TO_TERMINATE + SCALE_DOWN_REASON
MAX_REFUSALS_LISTED = 20


@dataclass(frozen=True)
class Held:
    """One worker holding capacity in a pool, as one side's records show it: a worker both
    sides list (an imported one) has the same pool and workerId on both, and counts once."""

    pool_id: str
    worker_id: str  # Taskcluster's workerId (the VM's)
    capacity: int


def pool_capacity(held: Iterable[Held]) -> dict[str, int]:
    """Capacity per pool, each worker once."""
    seen: dict[tuple[str, str], int] = {}
    for worker in held:
        seen[(worker.pool_id, worker.worker_id)] = worker.capacity
    total: Counter[str] = Counter()
    for (pool_id, _), capacity in seen.items():
        total[pool_id] += capacity
    return dict(total)


@dataclass(frozen=True)
class AgentLife:
    """What one worker of the legacy fleet did, split at the move."""

    provider_id: str
    pool_id: str
    worker_id: str
    before: Sequence[str]  # its events up to the move
    after: Sequence[str]  # its events after it
    refusals: Sequence[Refusal] = ()  # each call refused, with the answer's words


@dataclass(frozen=True)
class Comparison:
    """One request sampled both through the forwarding (the rootUrl, wm) and at the legacy."""

    endpoint: str
    pool_id: str
    equal: bool
    detail: str = ""  # when not equal: what came through the forwarding, and the legacy's


@dataclass(frozen=True)
class TakeOverFacts:
    provider_id: str  # the provider moved
    moved_at_s: float | None  # when the rootUrl was switched to wm (None: it never was)
    imported_pools: Sequence[str]
    imported_workers: int  # worker rows wm holds that the import wrote
    agents: Sequence[AgentLife]  # every worker the legacy fleet booted
    tasks_submitted: int
    tasks_completed: int
    tasks_requeued: int  # tasks a worker lost and gave back
    # per sample: pool id -> capacity (both sides, each worker once)
    capacity: Sequence[Mapping[str, int]]
    max_capacity: Mapping[str, int]
    leaked_vms: int  # every VM still live in the clouds after the drain, whoever made it
    leaked_resources: int
    forwarded: Mapping[str, int]  # endpoint -> requests the legacy answered through wm
    comparisons: Sequence[Comparison]
    import_runs: Sequence[str] = field(default_factory=tuple)  # each `wm import` summary line
    shed: int = 0  # sampled reads wm shed (429, too many in flight) and the demo asked again


def _count(agents: Iterable[AgentLife], prefixes: tuple[str, ...], *, after: bool) -> int:
    return sum(
        1
        for a in agents
        if any(
            e.startswith(prefixes) and e != SCALED_DOWN
            for e in (a.after if after else [*a.before, *a.after])
        )
    )


def _counted(agent: AgentLife, refusal: Refusal, moved: str) -> bool:
    """A refusal the figures count: any of a worker that stayed with the legacy, a moved
    worker's re-registration after the move."""
    if agent.provider_id != moved:
        return True
    return refusal.call == "reregisterWorker" and any(
        e.startswith("reregister-refused:") for e in agent.after
    )


def figures(facts: TakeOverFacts) -> dict[str, Any]:
    moved = [a for a in facts.agents if a.provider_id == facts.provider_id]
    stayed = [a for a in facts.agents if a.provider_id != facts.provider_id]
    # The moved provider's workers alive at the move: the ones the import took.
    through = [a for a in moved if a.before and not a.before[-1].startswith(("removed", "idle"))]
    over = [
        {"sample": i, "pool": pool, "capacity": capacity, "max": facts.max_capacity[pool]}
        for i, sample in enumerate(facts.capacity)
        for pool, capacity in sample.items()
        if pool in facts.max_capacity and capacity > facts.max_capacity[pool]
    ]
    peaks: dict[str, int] = {}
    for sample in facts.capacity:
        for pool, capacity in sample.items():
            peaks[pool] = max(peaks.get(pool, 0), capacity)
    return {
        "provider": facts.provider_id,
        "moved_at_s": None if facts.moved_at_s is None else round(facts.moved_at_s, 1),
        "imported_pools": len(facts.imported_pools),
        "imported_pool_ids": list(facts.imported_pools),
        "imported_workers": facts.imported_workers,
        "moved_workers_running_through": len(through),
        "moved_workers_reregistered_at_wm": sum(1 for a in through if "reregistered" in a.after),
        "imported_workers_refused": _count(moved, ("reregister-refused:",), after=True),
        "imported_workers_told_to_terminate": _count(moved, (TOLD_TO_TERMINATE,), after=True),
        "imported_workers_scaled_down": sum(1 for a in moved if SCALED_DOWN in a.after),
        # what they were answered, by reason or error code
        "imported_workers_answers": dict(
            Counter(
                e for a in moved for e in a.after if e.startswith((*REFUSED, TOLD_TO_TERMINATE))
            )
        ),
        "registrations_refused": _count(facts.agents, ("register-refused:",), after=False),
        "legacy_workers_refused": _count(stayed, REFUSED, after=False),
        "legacy_workers_told_to_terminate": _count(stayed, (TOLD_TO_TERMINATE,), after=False),
        "tasks_submitted": facts.tasks_submitted,
        "tasks_completed": facts.tasks_completed,
        "tasks_lost": facts.tasks_submitted - facts.tasks_completed,
        "tasks_requeued": facts.tasks_requeued,
        "capacity_samples": len(facts.capacity),
        "capacity_samples_over_max": len({o["sample"] for o in over}),
        "capacity_over_max": over[:10],
        "peak_capacity": {
            pool: {"peak": peaks.get(pool, 0), "max": maximum}
            for pool, maximum in sorted(facts.max_capacity.items())
        },
        "leaked_vms": facts.leaked_vms,
        "leaked_resources": facts.leaked_resources,
        "forwarded_requests": sum(facts.forwarded.values()),
        "forwarded_by_endpoint": dict(sorted(facts.forwarded.items())),
        "forwarded_answers_sampled": len(facts.comparisons),
        "forwarded_answers_equal": sum(1 for c in facts.comparisons if c.equal),
        "forwarded_reads_shed_and_retried": facts.shed,
        "forwarded_answers_differing": [
            {"endpoint": c.endpoint, "pool": c.pool_id, "detail": c.detail}
            for c in facts.comparisons
            if not c.equal
        ],
        "import_runs": list(facts.import_runs),
        # the refusals counted above: which worker, which call, what it was answered and how
        # its tries went
        "refusals": [
            {
                "provider": a.provider_id,
                "pool": a.pool_id,
                "worker": a.worker_id,
                "call": r.call,
                "status": r.status,
                "code": r.code,
                "message": r.message,
                "attempts": list(r.attempts),
                "credentials_left_s": r.credentials_left_s,
            }
            for a in facts.agents
            for r in a.refusals
            if _counted(a, r, facts.provider_id)
        ][:MAX_REFUSALS_LISTED],
    }


def problems(take_over: Mapping[str, Any]) -> list[str]:
    """What failed the move, in words; empty when it held."""
    t = take_over
    found = []
    if t["moved_at_s"] is None:
        found.append(f"take-over: {t['provider']} never moved to wm")
    if not t["imported_pools"]:
        found.append(f"take-over: no pool of {t['provider']} was imported")
    if not t["imported_workers"]:
        found.append(f"take-over: no worker of {t['provider']} was imported (nothing moved live)")
    for key, words in (
        ("imported_workers_refused", "imported workers refused at re-registration"),
        ("imported_workers_told_to_terminate", "imported workers told to terminate"),
        ("legacy_workers_refused", "legacy workers refused through the forwarding"),
        ("tasks_lost", "tasks lost"),
        ("capacity_samples_over_max", "samples with a pool's capacity over its maximum"),
        ("leaked_vms", "VMs left in the clouds after the drain"),
        ("leaked_resources", "NICs, public IPs or disks left after the drain"),
    ):
        if t[key]:
            found.append(f"take-over: {t[key]} {words}")
    for r in t["refusals"]:
        found.append(
            f"take-over: {r['call']} of {r['provider']} worker {r['worker']} ({r['pool']}) "
            f"answered {r['status']} {r['code']}: {r['message']} (tries: {r['attempts']})"
        )
    if t["moved_at_s"] is not None and not t["forwarded_requests"]:
        found.append("take-over: no request reached the legacy through wm's forwarding")
    if t["moved_at_s"] is not None and not t["forwarded_answers_sampled"]:
        found.append("take-over: no answer through the forwarding was sampled")
    differing = t["forwarded_answers_sampled"] - t["forwarded_answers_equal"]
    if differing:
        found.append(
            f"take-over: {differing} answers through the forwarding differed from the legacy's own"
        )
    return found
