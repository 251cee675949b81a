"""The `wm` command group: every command, and the entry point. Each command group lives in its
own module; none holds logic."""

from __future__ import annotations

import click

from wm.cli.context import CliContext, config_everywhere, config_option, run_guarded
from wm.cli.db import db
from wm.cli.pools import config_group, pools
from wm.cli.run import run
from wm.cli.status import status
from wm.cli.tasks import tasks
from wm.cli.workers import workers
from wm.take_over.cli import import_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@config_option
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """wm keeps cloud worker fleets on EC2, GCE and Azure matched to task-queue demand."""
    ctx.obj = CliContext(config_path)
    ctx.call_on_close(ctx.obj.close)


for command in (db, config_group, pools, import_command, workers, tasks, status, run):
    cli.add_command(command)
config_everywhere(cli)


def main() -> None:
    run_guarded(cli)
