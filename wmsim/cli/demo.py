"""`wmsim demo`: the whole system on simulated clouds, with a live view, a report and a plot."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from wm.cli.context import UserError
from wmsim.cli.context import SimContext
from wmsim.postgres import postgres

DEFAULT_OUT = "demo-out"
DEFAULT_POOL_FILES = ("*.yml", "*.yaml", "*.json")  # in POOLS (MARKET_POOLS with --market)
POOLS = Path("pools")
MARKET_POOLS = POOLS / "market"  # two zones a pool, the cheap one dry in the `demo` scenario
INTERRUPTED_EXIT = 130  # as a shell reports a command stopped by Ctrl-C


@click.command()
@click.option(
    "--minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="How long tasks keep arriving (default: the config's demo.minutes, 3).",
)
@click.option(
    "--workload",
    type=click.Choice(["steady-burst", "steady", "burst"]),
    default=None,
    help="A steady stream plus a burst (default), the stream alone, or the burst alone.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_OUT,
    show_default=True,
    help="Where report.json, report.png and the processes' logs go.",
)
@click.option(
    "--procfile",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default="Procfile",
    show_default=True,
    help="The processes to run.",
)
@click.option(
    "--pools",
    "pool_files",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Worker pool definitions to apply (JSON or YAML; repeatable). "
    "Default: every pools/*.yml, *.yaml and *.json.",
)
@click.option(
    "--preempt",
    "preempt_share",
    type=click.FloatRange(0, 1),
    default=None,
    help="Run every pool on spot VMs and have the clouds pre-empt this share of them.",
)
@click.option(
    "--take-over",
    is_flag=True,
    help="Start from a live legacy worker-manager fleet and move its Azure provider onto wm "
    "midway (README: what `make demo` shows).",
)
@click.option(
    "--market",
    metavar="SCENARIO",
    default=None,
    help="Have the clouds obey this market scenario (`demo`, S0..S5 or a file) on a compressed "
    "clock, the pools choose where to launch by cost, and the report show what they cost "
    "(default pools: pools/market/*.yml).",
)
@click.option(
    "--market-seed",
    type=int,
    default=None,
    help="The market scenario's seed (default: the config's demo.market_seed, 1).",
)
@click.option(
    "--live/--no-live",
    default=None,
    help="Redraw a table in place (default when the output is a terminal).",
)
@click.pass_context
def demo(
    ctx: click.Context,
    minutes: float | None,
    workload: str | None,
    out_dir: Path,
    procfile: Path,
    pool_files: tuple[Path, ...],
    preempt_share: float | None,
    take_over: bool,
    market: str | None,
    market_seed: int | None,
    live: bool | None,
) -> None:
    """Run every Procfile process against the simulated clouds and drive a workload.

    Uses DATABASE_URL when set; otherwise a throwaway local PostgreSQL removed at exit. Tasks
    arrive (a steady stream and a burst, 84 % EC2, 13 % Azure, 3 % GCE) for the pools of the
    applied definitions (--pools, default pools/*.yml), simulated workers boot,
    register, run them and leave; at the end the summary is printed and report.json and
    report.png are written to --out. Exits 0 only when every task ran, no process crashed and
    nothing was left in the clouds.
    """
    try:
        from rich.console import Console

        from wmsim.demo.interrupts import interrupted_by_sigterm
        from wmsim.demo.run import Demo, DemoRun
        from wmsim.demo.take_over import TakeOverDemo
    except ImportError as exc:
        raise UserError(
            f"the demo needs the simulator's packages ({exc.name} is missing): "
            "pip install -e '.[sim]'"
        ) from None

    if take_over and preempt_share:
        raise UserError("--take-over runs on-demand VMs: leave --preempt out")
    if market is not None:
        known_scenario(market)
    obj: SimContext = ctx.obj
    config = obj.settings()
    asked = {
        "minutes": minutes,
        "workload": workload,
        "preempt_share": preempt_share,
        "market": market,
        "market_seed": market_seed,
    }
    overrides = {k: v for k, v in asked.items() if v is not None}
    settings = config.demo.model_copy(update=overrides)
    if take_over and settings.market:
        raise UserError("--take-over runs without a market: leave --market out")
    console = Console()
    with interrupted_by_sigterm():
        try:
            with postgres() as server:
                console.print(f"== PostgreSQL from {server.origin}", highlight=False)
                run = DemoRun(
                    config_path=Path(config.wm.source),
                    procfile=procfile,
                    database_url=server.url,
                    out_dir=out_dir,
                    demo=settings,
                    live=console.is_terminal if live is None else live,
                    pool_files=pool_files
                    or default_pool_files(MARKET_POOLS if settings.market else POOLS),
                )
                code = (TakeOverDemo if take_over else Demo)(run, console).run()
        except KeyboardInterrupt:
            console.print("== interrupted: every process was stopped")
            sys.exit(INTERRUPTED_EXIT)
    sys.exit(code)


def default_pool_files(where: Path) -> tuple[Path, ...]:
    found = sorted(path for pattern in DEFAULT_POOL_FILES for path in where.glob(pattern))
    if not found:
        raise UserError(f"no worker pool definitions in {where}/: give --pools FILE")
    return tuple(found)


def known_scenario(market: str) -> None:
    """--market names a scenario `wmsim serve` can read, or the command stops here."""
    from wmsim.market import ScenarioError
    from wmsim.market.scenario import load as load_scenario

    try:
        load_scenario(market)
    except ScenarioError as exc:
        raise UserError(f"--market: {exc}") from None
