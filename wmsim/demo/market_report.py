"""The demo's market figures (`wmsim demo --market`), from the sims' ledgers, wm's worker rows
and its provisioner's and scanners' log lines (pure).

- modes: each pool's launch choice (`cost` in the demo's config), from its `launch-choice` lines.
- cost: what the clouds billed (their ledgers: total, per pool, per launch config) and the cost
  per task-hour (billed dollars over the completed tasks' run time, on the market's clock,
  which runs `speed` times real time).
- launches: per pool and launch config, the creates the clouds accepted (and whose VMs ran) in
  each time bucket since the workload started: where wm launched over time.
- dry_spells: for each scripted dry spell and each pool with a launch config there, when the
  spell began, the first refusal wm filed for it (an `offering-bench` line with a failure),
  and how many of the pool's passes (its `launch-choice` lines) after that refusal it took
  until a pass launched only elsewhere (`passes_to_leave`: 1 is the very next pass), when that
  launch was accepted, and the creates still sent into the dry zone after (probes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wm.model import Task, WorkerRecord


@dataclass(frozen=True)
class DrySpell:
    place: str  # cloud/region/zone, as the scenario's event names it
    at_s: float  # seconds after the workload started
    for_s: float


@dataclass(frozen=True)
class ConfigPlace:
    """Where one launch config of a pool launches."""

    pool_id: str
    launch_config_id: str
    place: str  # cloud/region/zone (zone "*" where the cloud picks)
    offering: str  # wm's offering key, as `offering-bench` lines name it


@dataclass(frozen=True)
class MarketFacts:
    scenario: str
    seed: int
    speed: float  # market seconds per real second
    started_at: float  # epoch seconds: the workload's start, when the market's clock began
    bucket_s: float
    ledgers: Mapping[str, Mapping[str, Any]]  # cloud -> its sim's GET /_sim/ledger
    spells: Sequence[DrySpell]
    configs: Sequence[ConfigPlace]
    choices: Sequence[Mapping[str, Any]]  # `launch-choice` log lines
    benches: Sequence[Mapping[str, Any]]  # `offering-bench` log lines


def total_cost(ledgers: Mapping[str, Mapping[str, Any]]) -> float:
    return round(sum(float(ledger.get("total", 0.0)) for ledger in ledgers.values()), 4)


def cost(facts: MarketFacts, tasks: Sequence[Task], pool_ids: Sequence[str]) -> dict[str, Any]:
    by_pool: dict[str, float] = {}
    by_config: dict[str, float] = {}
    for ledger in facts.ledgers.values():
        for pool, dollars in ledger.get("by_pool", {}).items():
            by_pool[pool] = by_pool.get(pool, 0.0) + float(dollars)
        for config, dollars in ledger.get("by_launch_config", {}).items():
            by_config[config] = by_config.get(config, 0.0) + float(dollars)
    hours = {pool: task_hours(tasks, pool, facts.speed) for pool in pool_ids}
    total_hours = sum(hours.values())
    total = total_cost(facts.ledgers)
    return {
        "total": total,
        "by_pool": {pool: round(v, 4) for pool, v in sorted(by_pool.items())},
        "by_launch_config": {config: round(v, 4) for config, v in sorted(by_config.items())},
        "task_hours": round(total_hours, 4),
        "per_task_hour": round(total / total_hours, 4) if total_hours else None,
        "per_task_hour_by_pool": {
            pool: round(by_pool.get(pool, 0.0) / h, 4) if h else None
            for pool, h in sorted(hours.items())
        },
    }


def task_hours(tasks: Sequence[Task], pool_id: str, speed: float) -> float:
    """Run time of the pool's completed tasks, in hours of the market's clock."""
    seconds = sum(
        (t.completed_at - t.claimed_at).total_seconds()
        for t in tasks
        if t.pool_id == pool_id and t.state == "completed" and t.completed_at and t.claimed_at
    )
    return seconds * speed / 3600


def launches(facts: MarketFacts, workers: Sequence[WorkerRecord]) -> dict[str, Any]:
    """Creates the clouds accepted and whose VMs ran, per pool and launch config, per bucket
    of the run."""
    accepted = [
        (w.pool_id, w.launch_config_id, w.accepted_at.timestamp() - facts.started_at)
        for w in workers
        if w.accepted_at is not None and ran(w)
    ]
    last = max((t for _, _, t in accepted), default=0.0)
    buckets = max(1, math.floor(max(last, 0.0) / facts.bucket_s) + 1)
    pools: dict[str, dict[str, list[int]]] = {}
    for c in facts.configs:
        pools.setdefault(c.pool_id, {})[c.launch_config_id] = [0] * buckets
    for pool, config, t in accepted:
        row = pools.get(pool, {}).get(config)
        if row is not None:
            row[min(buckets - 1, max(0, math.floor(t / facts.bucket_s)))] += 1
    return {
        "bucket_s": facts.bucket_s,
        "pools": pools,
        "places": {f"{c.pool_id}/{c.launch_config_id}": c.place for c in facts.configs},
    }


def ran(worker: WorkerRecord) -> bool:
    """Whether its VM ran: a GCE insert or an Azure deployment is accepted and may fail later,
    in its operation, when the zone has nothing to spare; that is no launch."""
    return worker.cloud_running_at is not None or worker.registered_at is not None


def dry_spells(facts: MarketFacts, workers: Sequence[WorkerRecord]) -> list[dict[str, Any]]:
    found = []
    for spell in facts.spells:
        by_pool: dict[str, list[ConfigPlace]] = {}
        for c in facts.configs:
            if c.place == spell.place:
                by_pool.setdefault(c.pool_id, []).append(c)
        for pool_id, dry in sorted(by_pool.items()):
            others = [c for c in facts.configs if c.pool_id == pool_id and c.place != spell.place]
            if others:
                found.append(_left(facts, spell, pool_id, dry, workers))
    return found


def _left(
    facts: MarketFacts,
    spell: DrySpell,
    pool_id: str,
    dry: Sequence[ConfigPlace],
    workers: Sequence[WorkerRecord],
) -> dict[str, Any]:
    dry_ids = {c.launch_config_id for c in dry}
    dry_offerings = {c.offering for c in dry}
    begins = facts.started_at + spell.at_s
    ends = begins + spell.for_s
    refusals = sorted(
        (line for line in facts.benches
         if line.get("offering") in dry_offerings
         and int(line.get("failures") or 0) >= 1
         and begins <= float(line["ts"]) <= ends),
        key=lambda line: float(line["ts"]),
    )  # fmt: skip
    figures: dict[str, Any] = {
        "place": spell.place,
        "pool": pool_id,
        "launch_configs": sorted(dry_ids),
        "dry_at_s": round(spell.at_s, 1),
        "dry_until_s": round(spell.at_s + spell.for_s, 1),
        "first_refusal_at_s": None,
        "refusal_code": None,
        "passes_to_leave": None,
        "left_at_s": None,
        "dry_creates_after_leaving": None,
    }
    if not refusals:
        return figures
    refused_at = float(refusals[0]["ts"])
    figures["first_refusal_at_s"] = round(refused_at - facts.started_at, 2)
    figures["refusal_code"] = refusals[0].get("code")
    passes = sorted(
        float(line["ts"])
        for line in facts.choices
        if line.get("pool") == pool_id and float(line["ts"]) > refused_at
    )
    created = [
        (w.created.timestamp(), w.launch_config_id, w.accepted_at if ran(w) else None)
        for w in workers
        if w.pool_id == pool_id
    ]
    for n, start in enumerate(passes, 1):
        end = passes[n] if n < len(passes) else math.inf
        batch = [(lc, accepted) for t, lc, accepted in created if start <= t < end]
        elsewhere = [a for lc, a in batch if lc not in dry_ids and a is not None]
        if elsewhere and not any(lc in dry_ids for lc, _ in batch):
            left_at = min(elsewhere).timestamp()
            figures["passes_to_leave"] = n
            figures["left_at_s"] = round(left_at - facts.started_at, 2)
            figures["dry_creates_after_leaving"] = sum(
                1 for t, lc, _ in created if lc in dry_ids and start <= t <= ends
            )
            break
    return figures


def build(
    facts: MarketFacts,
    tasks: Sequence[Task],
    workers: Sequence[WorkerRecord],
    pool_ids: Sequence[str],
) -> dict[str, Any]:
    """The report's `market` section."""
    return {
        "scenario": facts.scenario,
        "seed": facts.seed,
        "speed": facts.speed,
        # How each pool chose where to launch, as its `launch-choice` lines say (cost, shadow).
        "modes": {
            line["pool"]: line.get("mode")
            for line in sorted(facts.choices, key=lambda line: float(line["ts"]))
        },
        "cost": cost(facts, tasks, pool_ids),
        "launches": launches(facts, workers),
        "dry_spells": dry_spells(facts, workers),
    }


def summary(market: Mapping[str, Any]) -> list[str]:
    """--market: the summary's lines on cost, where wm launched, and each dry spell."""
    cost = market["cost"]
    per_hour = cost["per_task_hour"]
    lines = [
        f"market {market['scenario']} (seed {market['seed']}, x{market['speed']:g}): billed "
        f"${cost['total']:.2f}"
        + (f", ${per_hour:.4f} per task-hour" if per_hour is not None else "")
        + "; "
        + ", ".join(f"{pool} ${dollars:.2f}" for pool, dollars in cost["by_pool"].items())
    ]
    launches = market["launches"]
    for pool, configs in launches["pools"].items():
        for config, counts in configs.items():
            lines.append(
                f"launched {pool}/{config} per {launches['bucket_s']:g} s: "
                + " ".join(str(n) for n in counts)
            )
    for spell in market["dry_spells"]:
        where = f"{spell['place']} ran dry at {spell['dry_at_s']:g} s ({spell['pool']})"
        if spell["first_refusal_at_s"] is None:
            lines.append(f"{where}: wm was never refused there")
        elif spell["passes_to_leave"] is None:
            lines.append(
                f"{where}: first refused at {spell['first_refusal_at_s']:g} s "
                f"({spell['refusal_code']}); wm did not launch elsewhere after it"
            )
        else:
            lines.append(
                f"{where}: first refused at {spell['first_refusal_at_s']:g} s "
                f"({spell['refusal_code']}); launched elsewhere {spell['passes_to_leave']} "
                f"pass(es) later, at {spell['left_at_s']:g} s"
            )
    return lines
