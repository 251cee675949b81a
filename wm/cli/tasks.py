"""`wm tasks`: the builtin queue."""

from __future__ import annotations

import math

import click

from wm.cli.context import CliContext, UserError, echo_json, echo_table, json_option
from wm.db import pools as pool_store
from wm.db import tasks as task_store


@click.group()
def tasks() -> None:
    """Tasks of the builtin queue."""


def _finite(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    # FloatRange lets NaN through (every comparison with it is false), and Postgres stores it.
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


@tasks.command()
@click.argument("pool_id")
@click.option("--count", type=click.IntRange(min=1, max=100_000), required=True)
@click.option(
    "--duration",
    "duration_s",
    type=click.FloatRange(min=0, max=86_400),
    callback=_finite,
    default=10.0,
    show_default=True,
    help="Seconds each task runs on a simulated worker.",
)
@json_option
@click.pass_obj
def submit(obj: CliContext, pool_id: str, count: int, duration_s: float, as_json: bool) -> None:
    """Add COUNT pending tasks for POOL_ID."""
    engine = obj.engine()
    known = {p.pool_id: p for p in pool_store.load_pools(engine)}
    if pool_id not in known or known[pool_id].removed:
        raise UserError(f"no active pool {pool_id!r} (known: {', '.join(sorted(known)) or 'none'})")
    ids = task_store.submit_tasks(engine, pool_id, count, duration_s)
    if as_json:
        echo_json({"pool_id": pool_id, "task_ids": ids})
    else:
        click.echo(f"submitted {len(ids)} task(s) to {pool_id}")


@tasks.command("list")
@click.option("--pool", "pool_id", default=None)
@click.option(
    "--state", type=click.Choice(["pending", "claimed", "completed", "failed"]), default=None
)
@json_option
@click.pass_obj
def list_command(obj: CliContext, pool_id: str | None, state: str | None, as_json: bool) -> None:
    """Tasks, oldest first."""
    engine = obj.engine()
    if pool_id is not None and not any(p.pool_id == pool_id for p in pool_store.load_pools(engine)):
        # An empty list would read as "no tasks": a mistyped pool must say so.
        raise UserError(f"no pool {pool_id!r} in the database")
    found = task_store.list_tasks(engine, pool_id=pool_id, state=state)
    if as_json:
        echo_json(found)
        return
    echo_table(
        ["task", "pool", "state", "duration_s", "created", "claimed by"],
        [
            (
                t.task_id,
                t.pool_id,
                t.state,
                t.duration_s,
                t.created.isoformat(timespec="seconds"),
                t.claimed_by or "",
            )
            for t in found
        ],
    )
