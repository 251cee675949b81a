"""`wmsim serve`: the simulated clouds, in a process of their own."""

from __future__ import annotations

import json
import signal
from dataclasses import asdict
from pathlib import Path

import click

from wm.cli.context import echo_json, echo_table, json_option
from wm.ops.signal_event import SignalSafeEvent
from wmsim.cli.context import SimContext
from wmsim.clouds import CLOUDS
from wmsim.serve import describe, start_all


@click.command()
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(list(CLOUDS)),
    help="Only these clouds (default: every simulated cloud).",
)
@click.option(
    "--endpoints-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the endpoints as JSON to this file once every cloud answers.",
)
@json_option
@click.pass_obj
def serve(
    obj: SimContext, kinds: tuple[str, ...], endpoints_file: Path | None, as_json: bool
) -> None:
    """Serve simulated clouds that speak EC2's, GCE's and ARM's wire protocols, on the ports
    of the config's [sim] section, until stopped.

    Prints each endpoint (and, for Azure, the certificate to trust), then runs until SIGTERM
    or Ctrl-C.
    """
    settings = obj.settings()
    kinds = kinds or tuple(CLOUDS)
    sims = start_all(settings.sim, kinds)
    endpoints = describe(kinds, sims)
    if endpoints_file is not None:
        # Written whole, then renamed: a reader never sees half a file.
        partial = endpoints_file.with_name(endpoints_file.name + ".partial")
        partial.write_text(json.dumps([asdict(e) for e in endpoints], indent=2))
        partial.replace(endpoints_file)
    if as_json:
        echo_json(endpoints)
    else:
        echo_table(
            ["cloud", "endpoint", "certificate"],
            [(e.kind, e.endpoint, e.cert_path or "-") for e in endpoints],
        )
    stop = SignalSafeEvent()  # set by the handler: a plain Event can hang it
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        for running in sims:
            running.stop()
