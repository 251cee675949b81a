"""The simulator's configuration: the `[sim]` and `[demo]` tables of the config.toml wm reads.

The package declares both tables in wm's `wm.config_sections` entry-point group, so wm's own
reader leaves them alone; this module validates them beside wm's sections, so `wmsim demo` and
`wmsim serve` report every problem of the file at once. It is also the simulator's one reader
of the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, create_model, field_validator

from wm.config import loader as wm_config
from wm.config.base import CONFIG_DIR, ConfigPath, Frozen
from wm.config.loader import Config
from wm.errors import ConfigError
from wmsim.cloud import SimCloudConfig
from wmsim.clouds import CLOUDS
from wmsim.hand_made import DEMO_SHARE as HAND_MADE_SHARE
from wmsim.hand_made import KIND as HAND_MADE_KIND

# The top-level tables that are the simulator's; pyproject.toml declares the same names in
# the `wm.config_sections` entry-point group (a unit test holds the two together).
SECTIONS = frozenset({"sim", "demo"})


class _Frozen(Frozen):
    """The simulator's tables are as strict as wm's."""


def _known_scenario(market: str | None) -> str | None:
    """A market scenario must be one `wmsim serve` can read (its name or its file)."""
    if market is not None:
        from wmsim.market import ScenarioError
        from wmsim.market.scenario import load as load_scenario

        try:
            load_scenario(market)
        except ScenarioError as exc:
            raise ValueError(str(exc)) from None
    return market


# [sim]: a `[sim.<kind>]` table per simulated cloud of the table (wmsim/clouds.py), where
# `wmsim serve` keeps its certificates and endpoints, and the market the clouds obey (none by
# default: wmsim/market_sim.py).
SimConfig = create_model(
    "SimConfig",
    __base__=_Frozen,
    __validators__={"_known_scenario": field_validator("market")(_known_scenario)},
    **{kind: (SimCloudConfig, SimCloudConfig()) for kind in CLOUDS},
    # Beside the config file, as the paths its providers name (which point into it).
    state_dir=(ConfigPath, Field(".wm-sim", validate_default=True)),
    # A scenario of wmsim/market/scenarios ("S1") or a scenario file; its seed; market
    # seconds per real second (a compressed clock).
    market=(str | None, None),
    market_seed=(int, 1),
    market_speed=(float, Field(1.0, gt=0)),
)


class DemoConfig(_Frozen):
    """`wmsim demo`: its workload and how the simulated workers behave (compressed time)."""

    minutes: float = Field(3.0, gt=0)  # how long tasks keep arriving
    workload: Literal["steady-burst", "steady", "burst"] = "steady-burst"
    tasks_per_minute: float = Field(60.0, ge=0)  # the steady stream, over all pools
    burst_tasks: int = Field(160, ge=0)  # arriving at once, a third of the way in
    task_s: tuple[float, float] = (5.0, 20.0)  # task durations, uniform in this range
    # Shares of the work per provider kind, split over that kind's pools by max capacity (a
    # static pool's: its machines' capacity); the hand-made machines' share beside the clouds'.
    cloud_shares: Mapping[str, float] = Field(
        default_factory=lambda: {
            **{kind: cloud.demo_share for kind, cloud in CLOUDS.items()},
            HAND_MADE_KIND: HAND_MADE_SHARE,
        }
    )
    # Each static pool gets this many hand-made machines, made with createWorker, each running
    # this many tasks at once.
    hand_made_machines: int = Field(2, ge=0)
    hand_made_capacity: int = Field(2, ge=1)
    idle_timeout_s: float = Field(15.0, gt=0)  # a worker with no task this long removes itself
    drain_timeout_s: float = Field(150.0, gt=0)  # after the workload: wait this long at most
    sample_s: float = Field(1.0, gt=0)  # how often the demo samples the pools and the clouds
    # Spot: when above 0, every launch config runs on spot VMs and each cloud pre-empts this
    # share of them, at a uniform moment within preempt_within_s of their boot.
    preempt_share: float = Field(0.0, ge=0, le=1)
    preempt_within_s: float = Field(30.0, ge=0)
    seed: int = 1  # task durations and arrival jitter repeat from run to run
    # `--take-over`: the move happens this far into the workload (a fraction of it), and the
    # legacy's pools renew their workers' credentials this often (reregistrationTimeout), so
    # that the imported workers reregister at wm within the run.
    take_over_at: float = Field(0.4, gt=0, lt=1)
    take_over_reregistration_s: float = Field(20.0, gt=0)
    # `--market`: the clouds obey this market scenario (a name in wmsim/market/scenarios, or a
    # file) with this seed, on a clock `market_speed` times real time; unset, the speed puts
    # the scenario's first dry spell a third of the way into the workload. Its pools choose
    # where to launch by cost (`[launch_choice]`), and the report shows what they cost.
    market: str | None = None
    market_seed: int = 1
    market_speed: float | None = Field(None, gt=0)

    @field_validator("task_s")
    @classmethod
    def _ordered(cls, task_s: tuple[float, float]) -> tuple[float, float]:
        if not 0 < task_s[0] <= task_s[1]:
            raise ValueError("must be [shortest, longest] with 0 < shortest <= longest")
        return task_s

    _market_known = field_validator("market")(_known_scenario)


class _Sections(_Frozen):
    sim: SimConfig = SimConfig()
    demo: DemoConfig = DemoConfig()


@dataclass(frozen=True)
class SimSettings:
    """One config file as the simulator reads it."""

    wm: Config  # the deployment's sections, exactly as every wm process reads them
    sim: SimConfig  # [sim]: the simulated clouds
    demo: DemoConfig  # [demo]: the demo's workload and simulated workers


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> SimSettings:
    """Read and validate wm's sections and the simulator's; raise ConfigError listing every
    problem of both."""
    environ = os.environ if environ is None else environ
    file = wm_config.config_path(str(path) if path else None, environ)
    raw = wm_config.read_toml(file)
    problems: list[str] = []
    sections = config = None
    try:
        sections = _Sections.model_validate(
            {"sim": {}, **{key: raw[key] for key in SECTIONS if key in raw}},
            context={CONFIG_DIR: wm_config.config_dir(str(file))},
        )
    except ValidationError as exc:
        problems += wm_config.schema_problems(exc, union_tags=frozenset())
    try:
        config = wm_config.parse(raw, environ=environ, source=str(file), skip=SECTIONS)
    except ConfigError as exc:
        problems = [*exc.problems, *problems]
    if problems:
        raise ConfigError(problems, str(file))
    assert sections is not None and config is not None
    return SimSettings(config, sections.sim, sections.demo)


# What finding or starting a PostgreSQL server for the demo reads (wmsim/postgres.py).
POSTGRES_VARIABLES = ("DATABASE_URL", "DOCKER_HOST")


def postgres_environment() -> dict[str, str]:
    """This process's DATABASE_URL and DOCKER_HOST, those that are set."""
    return {name: os.environ[name] for name in POSTGRES_VARIABLES if name in os.environ}


def child_environment(overrides: Mapping[str, str], *, prepend_path: str = "") -> dict[str, str]:
    """The environment for a child process the simulator starts: this process's, with
    `overrides`, and `prepend_path` put first on PATH (where the child finds `wm`)."""
    environ = {**os.environ, **overrides}
    if prepend_path:
        environ["PATH"] = prepend_path + os.pathsep + os.environ.get("PATH", "")
    return environ


# The simulated clouds take fixed fake credentials: their SDKs must never ask a metadata service.
NO_METADATA_PROBES: Mapping[str, str] = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_GCE_CHECK": "true",
}


def simulated_child_environment(config_path: str | Path, database_url: str) -> dict[str, str]:
    """For a wm process a test or a benchmark starts against the simulated clouds: its config
    and database, no metadata probes, and no Sentry (a developer's DSN must not receive the
    faults a test injects)."""
    environ = child_environment(
        {"WM_CONFIG": str(config_path), "DATABASE_URL": database_url, **NO_METADATA_PROBES}
    )
    environ.pop("SENTRY_DSN", None)
    return environ
