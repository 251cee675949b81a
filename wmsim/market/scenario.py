"""A market scenario read from its TOML file: the offerings, how capacity moves, scripted
events, spot quotas and the pools a benchmark runs against it. Bad input is refused with the
file and the key that is wrong, before anything runs."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
CLOUDS_FILE = Path(__file__).resolve().parent / "clouds.toml"
REGIMES = ("ample", "tight", "dry")


class ScenarioError(ValueError):
    """A scenario or clouds file that cannot be read as written."""


@dataclass(frozen=True)
class SimOffering:
    """Where an instance can be launched, as the simulated market prices and runs out of it."""

    cloud: str  # a kind of wmsim.clouds: its entry in clouds.toml
    region: str
    zone: str | None
    instance_type: str
    market: str  # "spot" or "on-demand"

    @cached_property  # read in every step of a benchmark: made once
    def key(self) -> str:
        return f"{self.cloud}/{self.region}/{self.zone or '*'}/{self.instance_type}/{self.market}"

    @cached_property
    def place(self) -> str:
        """What one spare-capacity regime covers: a zone, or a region where there is none."""
        return f"{self.cloud}/{self.region}/{self.zone or '*'}"

    @classmethod
    def parse(cls, key: str) -> SimOffering:
        parts = key.split("/")
        if len(parts) != 5 or not all(parts):
            raise ScenarioError(f"not an offering (cloud/region/zone/type/market): {key!r}")
        cloud, region, zone, instance_type, market = parts
        return cls(cloud, region, None if zone == "*" else zone, instance_type, market)


@dataclass(frozen=True)
class CloudModel:
    name: str
    price_scope: str
    spot_band: tuple[float, float]
    price_step_s: float
    price_sigma: float
    hazard_per_h: float
    capacity_code: str
    quota_code: str
    all_or_nothing: bool
    even_split_abort: bool
    boot_s: float
    on_demand: dict[str, float]
    refusal_delay_s: float
    refusal_names_zones: bool
    signals: dict[str, Any]  # the signal names, cadences and call scopes (clouds.toml)


@dataclass(frozen=True)
class OfferingSpec:
    offering: SimOffering
    capacity: int  # spare instances with the place's capacity ample
    price: float  # multiplies the spot price's starting level (band middle)
    hazard: float  # multiplies the cloud's hazard
    unregistered: float  # share of launches that never register (a broken image, a bad zone)


@dataclass(frozen=True)
class Event:
    place: str  # cloud/region/zone (or cloud/region/* for a zoneless region)
    regime: str
    at_s: float
    for_s: float
    reclaim: float  # share of running spot reclaimed within minutes as it starts (dry)


@dataclass(frozen=True)
class Quota:
    cloud: str
    region: str
    market: str
    instances: int


@dataclass(frozen=True)
class Regimes:
    enabled: bool = True
    ample_min: float = 720.0  # mean minutes in each before it moves on
    tight_min: float = 60.0
    dry_min: float = 40.0
    dry_share: float = 0.3  # of tight spells that end dry rather than ample
    reclaim: float = 0.3  # share of running spot a dry spell reclaims as it starts


@dataclass(frozen=True)
class LaunchConfigSpec:
    launch_config_id: str
    offering: SimOffering
    weight: float | None
    capacity_per_worker: int
    max_capacity: int | None


@dataclass(frozen=True)
class PoolSpec:
    pool_id: str
    max_capacity: int
    tasks_per_hour: float
    task_min: float  # mean task run time
    burst_every_h: float  # a push's burst of tasks this often (0: none)
    burst_tasks: int
    launch_configs: tuple[LaunchConfigSpec, ...]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    hours: float
    price_spread: float  # starting spot levels differ by up to this share (uniform +-)
    drift: float  # multiplies each cloud's price_sigma (0: prices hold still)
    offerings: tuple[OfferingSpec, ...]
    events: tuple[Event, ...]
    quotas: tuple[Quota, ...]
    regimes: Regimes
    pools: tuple[PoolSpec, ...]
    clouds: dict[str, CloudModel]
    dry_watch: tuple[str, ...]  # places whose dry spells the benchmark times capacity after


def scenario_path(name_or_path: str) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        return candidate
    return SCENARIO_DIR / f"{name_or_path}.toml"


def load(name_or_path: str) -> Scenario:
    path = scenario_path(name_or_path)
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in SCENARIO_DIR.glob("*.toml")))
        raise ScenarioError(f"no market scenario {name_or_path!r} (known: {known})")
    try:
        raw = tomllib.loads(path.read_text())
        clouds = load_clouds()
        return _scenario(raw, clouds, path.stem)
    except (KeyError, TypeError, ValueError) as exc:
        raise ScenarioError(f"{path}: {exc}") from exc


def load_clouds(path: Path = CLOUDS_FILE) -> dict[str, CloudModel]:
    raw = tomllib.loads(path.read_text())
    out = {}
    for name, c in raw.items():
        low, high = c["spot_band"]
        out[name] = CloudModel(
            name=name,
            price_scope=_one_of(c["price_scope"], ("zone", "region"), f"{name}.price_scope"),
            spot_band=(float(low), float(high)),
            price_step_s=float(c["price_step_s"]),
            price_sigma=float(c["price_sigma"]),
            hazard_per_h=float(c["hazard_per_h"]),
            capacity_code=str(c["capacity_code"]),
            quota_code=str(c["quota_code"]),
            all_or_nothing=bool(c["all_or_nothing"]),
            even_split_abort=bool(c["even_split_abort"]),
            boot_s=float(c["boot_s"]),
            on_demand={k: float(v) for k, v in c["on_demand"].items()},
            refusal_delay_s=float(c["refusal_delay_s"]),
            refusal_names_zones=bool(c["refusal_names_zones"]),
            signals={
                k: c[k]
                for k in (
                    "availability_signal",
                    "preemption_signal",
                    "price_refresh_s",
                    "availability_refresh_s",
                    "preemption_refresh_s",
                    "price_calls",
                    "availability_calls",
                    "preemption_calls",
                )
            },
        )
    return out


def _one_of(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise ValueError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _offering(key: str, clouds: dict[str, CloudModel], where: str) -> SimOffering:
    o = SimOffering.parse(key)
    if o.cloud not in clouds:
        raise ValueError(f"{where}: unknown cloud {o.cloud!r} in {key!r}")
    if o.instance_type not in clouds[o.cloud].on_demand:
        raise ValueError(f"{where}: no on-demand price for {o.instance_type!r} in clouds.toml")
    _one_of(o.market, ("spot", "on-demand"), f"{where}: market")
    return o


def _scenario(raw: dict[str, Any], clouds: dict[str, CloudModel], stem: str) -> Scenario:
    known = {
        "name", "title", "hours", "price_spread", "drift", "offerings", "events", "quotas",
        "regimes", "pools", "dry_watch",
    }  # fmt: skip
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"unknown key(s): {', '.join(unknown)}")
    offerings = tuple(
        OfferingSpec(
            offering=_offering(o["key"], clouds, f"offerings[{i}]"),
            capacity=int(o.get("capacity", 200)),
            price=float(o.get("price", 1.0)),
            hazard=float(o.get("hazard", 1.0)),
            unregistered=float(o.get("unregistered", 0.0)),
        )
        for i, o in enumerate(raw["offerings"])
    )
    keys = {spec.offering.key for spec in offerings}
    if len(keys) != len(offerings):
        raise ValueError("offerings: an offering is listed twice")
    events = tuple(
        Event(
            place=e["place"],
            regime=_one_of(e["regime"], REGIMES, f"events[{i}].regime"),
            at_s=float(e["at_min"]) * 60,
            for_s=float(e["for_min"]) * 60,
            reclaim=float(e.get("reclaim", 0.0)),
        )
        for i, e in enumerate(raw.get("events", []))
    )
    quotas = tuple(
        Quota(q["cloud"], q["region"], q.get("market", "spot"), int(q["instances"]))
        for q in raw.get("quotas", [])
    )
    regimes = Regimes(**raw.get("regimes", {}))
    pools = []
    for i, p in enumerate(raw.get("pools", [])):
        lcs = []
        for j, lc in enumerate(p["launch_configs"]):
            o = _offering(lc["offering"], clouds, f"pools[{i}].launch_configs[{j}]")
            if o.key not in keys:
                raise ValueError(f"pools[{i}].launch_configs[{j}]: {o.key} is not an offering")
            lcs.append(
                LaunchConfigSpec(
                    launch_config_id=lc.get("id", f"lc-{j:03d}"),
                    offering=o,
                    weight=lc.get("weight"),
                    capacity_per_worker=int(lc.get("capacity", 1)),
                    max_capacity=lc.get("max_capacity"),
                )
            )
        pools.append(
            PoolSpec(
                pool_id=p["id"],
                max_capacity=int(p["max_capacity"]),
                tasks_per_hour=float(p["tasks_per_hour"]),
                task_min=float(p["task_min"]),
                burst_every_h=float(p.get("burst_every_h", 0.0)),
                burst_tasks=int(p.get("burst_tasks", 0)),
                launch_configs=tuple(lcs),
            )
        )
    return Scenario(
        name=raw.get("name", stem),
        title=raw.get("title", ""),
        hours=float(raw.get("hours", 24)),
        price_spread=float(raw.get("price_spread", 0.0)),
        drift=float(raw.get("drift", 1.0)),
        offerings=offerings,
        events=events,
        quotas=quotas,
        regimes=regimes,
        pools=tuple(pools),
        clouds=clouds,
        dry_watch=tuple(raw.get("dry_watch", ())),
    )
