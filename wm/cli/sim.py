"""`wm sim`: the simulated clouds."""

from __future__ import annotations

import signal
import threading

import click

from wm.cli.context import CliContext, echo_json, echo_table, json_option
from wm.sim.serve import SIM_MODULES, describe, start_all


@click.group()
def sim() -> None:
    """Simulated clouds that speak EC2's, GCE's and ARM's wire protocols."""


@sim.command()
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(list(SIM_MODULES)),
    help="Only these clouds (default: all three).",
)
@json_option
@click.pass_obj
def serve(obj: CliContext, kinds: tuple[str, ...], as_json: bool) -> None:
    """Serve the simulated clouds on the ports of the config's [sim] section until stopped.

    Prints each endpoint (and, for Azure, the certificate to trust), then runs until SIGTERM
    or Ctrl-C.
    """
    config = obj.config()
    kinds = kinds or tuple(SIM_MODULES)
    sims = start_all(config, kinds)
    endpoints = describe(kinds, sims)
    if as_json:
        echo_json(endpoints)
    else:
        echo_table(
            ["cloud", "endpoint", "certificate"],
            [(e.kind, e.endpoint, e.cert_path or "-") for e in endpoints],
        )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        for running in sims:
            running.stop()
