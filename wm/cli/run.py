"""`wm run NAME`: start one of the Procfile's processes."""

from __future__ import annotations

import importlib
import signal
import sys

import click

from wm.cli.context import CliContext, UserError
from wm.errors import PortTaken
from wm.kinds import KINDS
from wm.ops.metrics_ports import metrics_port as default_metrics_port

PROCESSES = ("provisioner", "scanner", "web", "all")
# The kinds a scanner lists and a provisioner launches for (a static kind has no cloud).
SCANNED_KINDS = tuple(name for name, d in KINDS.items() if d.scanned)


@click.command()
@click.argument("name", type=click.Choice(PROCESSES))
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(SCANNED_KINDS),
    help="scanner, provisioner: only providers of this cloud (repeatable).",
)
@click.option(
    "--except",
    "excluded",
    multiple=True,
    type=click.Choice(SCANNED_KINDS),
    help="scanner, provisioner: every provider but those of this cloud (repeatable).",
)
@click.option(
    "--supervised-by",
    type=int,
    default=None,
    hidden=True,  # set by a provisioner for the child that runs one cloud's passes
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics on this port, 0 for none (default: the config's "
    "metrics.port plus this process type's slot, README: Metrics).",
)
@click.pass_obj
def run(
    obj: CliContext,
    name: str,
    kinds: tuple[str, ...],
    excluded: tuple[str, ...],
    metrics_port: int | None,
    supervised_by: int | None,
) -> None:
    """Run a wm process until SIGTERM: provisioner, scanner, web, or all of them in one."""
    config = obj.config()
    obj.database_url()  # every process needs one: said here, the same for each
    if (kinds or excluded) and name not in ("scanner", "provisioner", "all"):
        raise UserError("--kind and --except apply to the scanner and the provisioner only")
    if kinds and excluded:
        raise UserError("use --kind or --except, not both")
    port = (
        metrics_port
        if metrics_port is not None
        else default_metrics_port(config.metrics.port, name, kinds)
    )
    module = importlib.import_module(f"procs.{name}")
    options = {"metrics_port": port or None}
    if name in ("scanner", "provisioner", "all"):
        options |= {"kinds": kinds, "excluded": excluded}
    if supervised_by is not None:
        if name != "provisioner":
            raise UserError("--supervised-by applies to the provisioner only")
        options |= {"supervised_by": supervised_by}
    try:
        code = module.main(config, **options)
    except PortTaken as exc:
        raise UserError(str(exc)) from None
    # Stopped: a stop signal arriving while the interpreter shuts down (the group's, when a
    # parent passes it on as well) would kill it by the signal and turn a clean exit into -15.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    sys.exit(code)
