"""`wm status`: one row per pool; with --pool, that pool's latency by stage."""

from __future__ import annotations

from collections import defaultdict

import click

from wm.cli.context import CliContext, UserError, echo_json, echo_table, json_option
from wm.db.pools import pool_statuses
from wm.db.stages import STAGES_WINDOW, recent_workers
from wm.model import WorkerRecord
from wm.take_over.adoption_report import status_line as take_over_status
from wm.workers import stages


@click.command()
@click.option("--pool", "pool_id", default=None, help="Only this pool, with its stages.")
@json_option
@click.pass_obj
def status(obj: CliContext, pool_id: str | None, as_json: bool) -> None:
    """Pending tasks, capacity by state, errors and the slowest stage in the last hour, per pool.

    A stage is a step of a worker's life (task pending -> capacity requested -> cloud accepted
    -> cloud running -> registered -> first task claimed; removal decided -> delete call ->
    gone); the slowest is the one with the highest p95. --pool shows every stage.
    """
    engine = obj.engine()
    rows = pool_statuses(engine, pool_id)
    if pool_id is not None and not rows:
        raise UserError(f"no pool {pool_id!r} in the database")
    by_pool: dict[str, list[WorkerRecord]] = defaultdict(list)
    for worker in recent_workers(engine, pool_id):
        by_pool[worker.pool_id].append(worker)
    summaries = {s.pool_id: stages.summarise(by_pool[s.pool_id]) for s in rows}
    if as_json:
        echo_json([{**vars(s), "stages": list(summaries[s.pool_id].values())} for s in rows])
        return
    echo_table(
        [
            "pool",
            "provider",
            "pending",
            "claimed",
            "requested",
            "running",
            "stopping",
            "errors 1h",
            "slowest stage 1h (p95)",
        ],
        [
            (
                s.pool_id,
                s.provider_id or "(removed)",
                s.pending,
                s.claimed,
                s.requested,
                s.running,
                s.stopping,
                s.errors_last_hour,
                _slowest(summaries[s.pool_id]),
            )
            for s in rows
        ],
    )
    if pool_id is None and (line := take_over_status(engine, obj.config().providers)) is not None:
        click.echo(f"\n{line}")  # the take-over's hook: imported workers left
    if pool_id is not None:
        summary = summaries[pool_id]
        slowest = stages.slowest(summary)
        click.echo(f"\nstages of {pool_id} over the last {STAGES_WINDOW}:")
        echo_table(
            ["stage", "workers", "p50 s", "p95 s", ""],
            [
                (
                    stages.label(name),
                    item.count,
                    _seconds(item.p50_s),
                    _seconds(item.p95_s),
                    "<- slowest" if slowest and slowest.stage == name else "",
                )
                for name, item in summary.items()
            ],
        )


def _slowest(summary: dict[str, stages.StageSummary]) -> str:
    slowest = stages.slowest(summary)
    return f"{stages.label(slowest.stage)} ({_seconds(slowest.p95_s)} s)" if slowest else "-"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
