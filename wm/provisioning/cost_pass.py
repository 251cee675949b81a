"""The launch choice by cost in a pass, as the provisioner runs it (issue 40): score the
opted-in pools' launch configs from one reading, write the bench the pass's creates leave, and
export each opted-in pool's cost per hour. Every step falls back to weights, with an error
line, when it fails: the pass goes on. A provisioner whose pools are all in "weights" mode
reads and writes nothing here."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine

from wm.config.launch_choice import ChoiceMode, LaunchChoiceConfig
from wm.db import offering_state
from wm.model import LaunchConfigRecord, Offering, PoolRecord
from wm.ops.telemetry import log
from wm.providers.base import LaunchResult, Provider
from wm.provisioning import cost_planning
from wm.provisioning.cost_planning import PoolScore
from wm.provisioning.pool_plan import PlanRound


@dataclass(frozen=True)
class CostPass:
    engine: Engine
    launch_choice: LaunchChoiceConfig

    def score(
        self,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        short: Mapping[str, int | None],
        earlier: Sequence[PlanRound] = (),
    ) -> tuple[dict[str, PoolScore], cost_planning.Reading | None]:
        """Score the launch configs of the pools in "shadow" or "cost" mode that launch, from
        one reading of the signals, bench and evidence; log each in a `launch-choice` line. A
        pool whose scoring fails launches by weights (and says so)."""
        if self.launch_choice.all_weights:
            return {}, None
        choices = {p.pool_id: self.launch_choice.for_pool(p.pool_id) for p in pools}
        opted = [
            p.pool_id
            for p in pools
            if choices[p.pool_id].mode != ChoiceMode.WEIGHTS
            and configs[p.pool_id]
            and (short[p.pool_id] is None or (short[p.pool_id] or 0) > 0)
        ]
        if not opted:
            return {}, None
        try:
            reading = cost_planning.read(
                self.engine, provider.id, opted, self.launch_choice.clock_speed
            )
        except Exception:  # the choice falls back to weights; the pass goes on
            log("launch-choice-failed", logging.ERROR, exc_info=True, provider=provider.id)
            return {}, None
        now = time.time()
        # The bench is written once the pass's creates are in: a probe an earlier planning of
        # this pass sent is the window's one already.
        reading = cost_planning.with_probes_out(reading, probes_sent(earlier), now)
        scores = {}
        for pool_id in opted:
            try:
                scores[pool_id] = cost_planning.score_pool(
                    pool_id,
                    choices[pool_id],
                    configs[pool_id],
                    lambda lc: provider.offering(lc.configuration, lc.region),
                    reading,
                    now,
                )
                cost_planning.report(pool_id, provider.id, scores[pool_id])
            except Exception:
                cost_planning.log_failed(provider.id, pool_id)
        return scores, reading

    def bench_after(
        self, provider: Provider, rounds: Sequence[PlanRound], results: Mapping[str, LaunchResult]
    ) -> None:
        """Write what the pass's creates of opted-in pools say of their offerings: refused
        capacity or quota benches the offerings the refusal's scope covers, a success clears
        its offering, a probe sent is the window's one."""
        scored = [(r, pool_id, s) for r in rounds for pool_id, s in r.scores.items()]
        if not scored:
            return
        try:
            offering_of: dict[tuple[str, str], Offering | None] = {}
            for _, pool_id, score in scored:
                for lc_id, offering in score.offerings.items():
                    offering_of[(pool_id, lc_id)] = offering
            # The first reading of the pass: the bench as it was before its creates (a later
            # planning's holds its earlier probes too, which bench_after adds itself).
            first = next(r.reading for r in rounds if r.reading is not None)
            probed = probes_sent(rounds)
            outcomes = []
            for planned in rounds:
                for batch in planned.batches():
                    key = (batch.pool_id, batch.spec.launch_config_id)
                    if key not in offering_of:
                        continue
                    for intent in batch.intents:
                        result = results.get(intent.worker_id)
                        if result is None:
                            continue
                        outcomes.append(
                            cost_planning.CreateOutcome(
                                offering_of[key],
                                batch.spec,
                                result.cloud_id is not None,
                                result.error,
                            )
                        )
            changes = cost_planning.bench_after(
                first.bench,
                {o for o in offering_of.values() if o is not None},
                probed,
                outcomes,
                provider.error_scope,
                time.time(),
                self.launch_choice.clock_speed,
            )
            offering_state.write_bench(self.engine, provider.id, changes)
            cost_planning.log_bench(provider.id, changes)
        except Exception:
            log("offering-bench-failed", logging.ERROR, exc_info=True, provider=provider.id)

    def export_costs(
        self,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        rounds: Sequence[PlanRound],
    ) -> None:
        """Each opted-in pool's cost per hour at the prices wm holds (a gauge)."""
        if self.launch_choice.all_weights:
            return
        opted = [
            p.pool_id
            for p in pools
            if self.launch_choice.for_pool(p.pool_id).mode != ChoiceMode.WEIGHTS
        ]
        if not opted:
            return
        try:
            reading = next((r.reading for r in rounds if r.reading is not None), None)
            signals = (
                reading.signals
                if reading is not None
                else offering_state.read_signals(self.engine, provider.id)
            )
            running = offering_state.running_workers(self.engine, opted)
            for pool_id in opted:
                cost_planning.export_cost(
                    pool_id,
                    configs[pool_id],
                    lambda lc: provider.offering(lc.configuration, lc.region),
                    signals,
                    {lc: n for (p, lc), n in running.items() if p == pool_id},
                )
        except Exception:
            log("pool-cost-failed", logging.ERROR, exc_info=True, provider=provider.id)


def probes_sent(rounds: Sequence[PlanRound]) -> list[Offering]:
    """The offerings the plannings' cost-mode pools sent their window's probe to."""
    sent: list[Offering] = []
    for planned in rounds:
        for plan in planned.plans:
            score = planned.scores.get(plan.report.pool_id)
            if score is not None and score.launches_by_cost:
                launched: dict[str, int] = {}
                for intent in plan.intents:
                    launched[intent.launch_config_id] = launched.get(intent.launch_config_id, 0) + 1
                sent += cost_planning.probes(score, launched)
    return sent
