"""`wm workers`: worker rows."""

from __future__ import annotations

import click

from wm.cli.context import CliContext, UserError, echo_json, echo_table, json_option
from wm.db.pools import load_pools
from wm.db.workers import list_workers
from wm.model import WorkerState


@click.group()
def workers() -> None:
    """Workers (one row per VM)."""


@workers.command("list")
@click.option("--pool", "pool_id", default=None, help="Only this pool's workers.")
@click.option(
    "--state",
    type=click.Choice([s.value for s in WorkerState]),
    default=None,
    help="Only workers in this state.",
)
@json_option
@click.pass_obj
def list_command(obj: CliContext, pool_id: str | None, state: str | None, as_json: bool) -> None:
    """Workers by their Taskcluster id (workerGroup, workerId), with their provider (a cloud
    account, or a static provider's machines), state, wm's own id and, for stopped ones, why
    they stopped."""
    engine = obj.engine()
    if pool_id is not None and not any(p.pool_id == pool_id for p in load_pools(engine)):
        # An empty list would read as "no workers": a mistyped pool must say so.
        raise UserError(f"no pool {pool_id!r} in the database")
    found = list_workers(engine, pool_id=pool_id, state=WorkerState(state) if state else None)
    if as_json:
        echo_json(found)
        return
    # A worker is named as Taskcluster names it (workerGroup/workerId: EC2 instance id, GCE
    # numeric id, Azure VM name; "-" until the cloud told wm); wm's own intent key beside it.
    echo_table(
        [
            "worker id",
            "group",
            "pool",
            "provider",
            "state",
            "capacity",
            "wm id",
            "created",
            "reason",
        ],
        [
            (
                w.tc_worker_id or "-",
                w.worker_group,
                w.pool_id,
                w.provider_id,
                w.state.value,
                w.capacity,
                w.worker_id,
                w.created.isoformat(timespec="seconds"),
                w.stop_reason or "",
            )
            for w in found
        ],
    )
