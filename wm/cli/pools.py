"""`wm config` and `wm pools`: the configuration and the pools it defines."""

from __future__ import annotations

import click

from wm.cli.context import CliContext, UserError, echo_json, echo_table, json_option
from wm.db import pool_errors
from wm.db import pools as pool_store


@click.group("config")
def config_group() -> None:
    """The configuration file."""


@config_group.command()
@json_option
@click.pass_obj
def check(obj: CliContext, as_json: bool) -> None:
    """Load and validate the config; list every problem with its key path (exit 2 if any).

    Touches nothing: no database connection is made.
    """
    config = obj.config()
    summary = {
        "source": config.source,
        "deployment_id": config.deployment_id,
        "root_url": config.root_url,
        "providers": [p.id for p in config.providers],
        "pools": [p.id for p in config.pools],
    }
    if as_json:
        echo_json({"ok": True, **summary})
        return
    click.echo(
        f"{config.source}: OK — deployment {config.deployment_id} at {config.root_url}, "
        f"{len(config.providers)} providers, {len(config.pools)} pools"
    )


@click.group()
def pools() -> None:
    """Worker pools."""


@pools.command()
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.pass_obj
def sync(obj: CliContext, dry_run: bool) -> None:
    """Make the database's pools match the config, in one transaction."""
    plan = pool_store.sync_from_config(obj.engine(), obj.config(), apply=False)
    if plan.empty:
        click.echo("pools already match the config: nothing to do")
        return
    for line in plan.lines:
        click.echo(line)
    if dry_run:
        click.echo("dry run: nothing changed")
        return
    pool_store.apply_sync(obj.engine(), plan)
    click.echo(f"applied {len(plan.lines)} change(s)")


@pools.command("list")
@json_option
@click.pass_obj
def list_pools(obj: CliContext, as_json: bool) -> None:
    """Every pool in the database, with its provider and capacity bounds."""
    records = pool_store.load_pools(obj.engine())
    if as_json:
        echo_json(records)
        return
    echo_table(
        ["pool", "provider", "previous", "min", "max", "ratio", "removed"],
        [
            (
                p.pool_id,
                p.provider_id or "-",
                ",".join(p.previous_provider_ids) or "-",
                p.min_capacity,
                p.max_capacity,
                p.scaling_ratio,
                "yes" if p.removed else "",
            )
            for p in records
        ],
    )


@pools.command()
@click.argument("pool_id")
@json_option
@click.pass_obj
def errors(obj: CliContext, pool_id: str, as_json: bool) -> None:
    """Recent errors of one pool (launch failures, worker reports), newest first."""
    engine = obj.engine()
    if not any(p.pool_id == pool_id for p in pool_store.load_pools(engine)):
        raise UserError(f"no pool {pool_id!r} in the database (run `wm pools sync`?)")
    found = pool_errors.list_errors(engine, pool_id)
    if as_json:
        echo_json(found)
        return
    echo_table(
        ["reported", "kind", "launch config", "title", "description"],
        [
            (
                e.reported.isoformat(timespec="seconds"),
                e.kind,
                e.launch_config_id or "-",
                e.title,
                e.description,
            )
            for e in found
        ],
    )
