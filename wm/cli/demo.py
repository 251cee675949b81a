"""`wm demo`: the whole set-up on this machine, then the state of every pool."""

from __future__ import annotations

import click

from wm.cli.context import CliContext
from wm.db.server import postgres


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Find or start Postgres, migrate, check the config, sync its pools, show `wm status`.

    Uses DATABASE_URL when set; otherwise a throwaway local PostgreSQL removed at exit.
    """
    from wm.cli.db import upgrade
    from wm.cli.pools import check, sync
    from wm.cli.status import status

    obj: CliContext = ctx.obj
    click.echo("== checking the config")
    ctx.invoke(check, as_json=False)
    with postgres() as server:
        click.echo(f"== PostgreSQL from {server.origin}")
        obj.engine(server.url)
        click.echo("== migrating the database")
        ctx.invoke(upgrade)
        click.echo("== syncing pools from the config")
        ctx.invoke(sync, dry_run=False)
        click.echo("== wm status")
        ctx.invoke(status, pool_id=None, as_json=False)
        obj.close()
    click.echo(
        "== done. The processes that launch and scan workers arrive with the provisioner and "
        "scanner issues; until then the demo stops after showing the pools."
    )
