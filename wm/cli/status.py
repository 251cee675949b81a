"""`wm status`: one row per pool."""

from __future__ import annotations

import click

from wm.cli.context import CliContext, UserError, echo_json, echo_table, json_option
from wm.db.pools import pool_statuses


@click.command()
@click.option("--pool", "pool_id", default=None, help="Only this pool.")
@json_option
@click.pass_obj
def status(obj: CliContext, pool_id: str | None, as_json: bool) -> None:
    """Pending tasks, capacity by state and errors in the last hour, per pool."""
    rows = pool_statuses(obj.engine(), pool_id)
    if pool_id is not None and not rows:
        raise UserError(f"no pool {pool_id!r} in the database")
    if as_json:
        echo_json(rows)
        return
    echo_table(
        ["pool", "provider", "pending", "claimed", "requested", "running", "stopping", "errors 1h"],
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
            )
            for s in rows
        ],
    )
