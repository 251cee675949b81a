"""`wm db`: the database schema."""

from __future__ import annotations

import click

from wm.cli.context import CliContext
from wm.db import migrate


@click.group()
def db() -> None:
    """The database schema."""


@db.command()
@click.pass_obj
def upgrade(obj: CliContext) -> None:
    """Migrate the database to the newest schema (safe to run again: a no-op)."""
    before, after = migrate.upgrade(obj.engine(schema=False))
    if before == after:
        click.echo(f"database already at revision {after}")
    else:
        click.echo(f"database migrated from {before or 'empty'} to {after}")
