"""The `wmsim` command: the simulated clouds and the demo, apart from wm's own `wm` command
so that nothing a production deployment runs imports the simulator. Each command lives in its
own module; none holds logic."""

from __future__ import annotations

import click

from wm.cli.context import config_everywhere, config_option, run_guarded
from wmsim.cli.context import SimContext
from wmsim.cli.demo import demo
from wmsim.cli.serve import serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@config_option
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Simulated EC2, GCE and Azure clouds, and a demo of wm running on them."""
    ctx.obj = SimContext(config_path)


for command in (serve, demo):
    cli.add_command(command)
config_everywhere(cli)


def main() -> None:
    run_guarded(cli)
