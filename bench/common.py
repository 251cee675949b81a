"""What the benchmarks share: the fleet mix, the simulated clouds in a process of their own, the
providers' config, a fresh database per side, wm's logging, and how results are printed and
written (see bench/README.md)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import multiprocessing
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Self, TypeVar

from sqlalchemy import Engine

from wm import config as config_module
from wm.config import Config
from wm.db import migrate
from wm.db import pools as pool_store
from wm.db.engine import create_database, drop_database, make_engine, with_database
from wm.db.server import PostgresServer
from wm.pool_sync import plan_sync
from wm.telemetry import JsonLineFormatter

K = TypeVar("K", bound=Hashable)
WsgiApp = Callable[..., Any]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEPLOYMENT_ID = "wm-bench"
# (pool id, cloud, share of the fleet or demand): EC2 84 %, Azure 13 %, GCE 3 %.
POOL_MIX = (
    ("proj-ci/linux-large", "aws", 0.50),
    ("proj-ci/linux-small", "aws", 0.24),
    ("proj-ci/linux-gpu", "aws", 0.10),
    ("proj-ci/win-2022", "azure", 0.10),
    ("proj-ci/win-11", "azure", 0.03),
    ("proj-ci/gce-linux", "gcp", 0.03),
)
CLOUDS = ("aws", "azure", "gcp")
PROVIDER_IDS = {"aws": "aws-bench", "gcp": "gcp-bench", "azure": "azure-bench"}
MACHINES = {  # cloud -> (region or zone, machine type, image)
    "aws": ("us-east-1", "m5.large", "ami-0abcdef1234567890"),
    "gcp": ("us-central1-a", "e2-small", "projects/debian-cloud/global/images/family/debian-12"),
    "azure": ("eastus", "Standard_D2s_v5", "Canonical:ubuntu-24_04-lts:server:latest"),
}
AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-0000000be7c4"
AZURE_RESOURCE_GROUP = "wm-bench"
GCP_PROJECT = "wm-bench"
JOIN_TIMEOUT_S = 30.0
CLOUDS_START_TIMEOUT_S = 60.0
QUIET_LOGGERS = ("azure", "botocore", "urllib3", "werkzeug", "google")


def split_by_share(total: int, shares: Mapping[K, float]) -> dict[K, int]:
    """`total` split in proportion to `shares`, largest remainders first (ties in the given
    order), summing to `total`."""
    exact = {key: total * share for key, share in shares.items()}
    counts = {key: math.floor(value) for key, value in exact.items()}
    by_remainder = sorted(exact, key=lambda k: exact[k] - counts[k], reverse=True)
    for key in by_remainder[: total - sum(counts.values())]:
        counts[key] += 1
    return counts


# -- the simulated clouds, in a process of their own --------------------------------------------


def wrap_app(sim: Any, wrap: Callable[[WsgiApp], WsgiApp]) -> WsgiApp:
    """Put a WSGI middleware in front of a started sim; returns the middleware.

    The one reach into a sim's insides: its werkzeug server's app, wrapped before any request
    (wm/sim/wsgi.py: ServerThread._server is a BaseWSGIServer).
    """
    server = sim._server._server
    server.app = wrapped = wrap(server.app)
    return wrapped


def serve_clouds(conn: Connection, make_host: Callable[..., Any], args: tuple) -> None:
    """The clouds' process: `make_host(*args, stack)` starts the sims; then each request
    `(method, args)` is answered with `("ok", host.method(*args))` or `("error", repr)` until
    "stop". The host's `ready()` is sent first."""
    with contextlib.ExitStack() as stack:
        try:
            host = make_host(*args, stack)
        except Exception as exc:
            conn.send({"error": repr(exc)})
            return
        conn.send(host.ready())
        while True:
            request = conn.recv()
            if request == "stop":
                break
            name, call_args = request
            try:
                conn.send(("ok", getattr(host, name)(*call_args)))
            except Exception as exc:
                conn.send(("error", f"{name}: {exc!r}"))
    conn.send("stopped")


class CloudProcess:
    """The simulated clouds in a process of their own, so their work (moto's above all) does not
    share the benchmark's GIL: wm is measured, not the simulation.

    The host (built in the child by `make_host(*args, stack)`) answers `ready()` with at least
    {"endpoints": {cloud: url}, "cert_path": ARM's certificate}; `ask` calls its methods.
    Answers cross the process boundary pickled: plain data only (a dataclass of a module run as
    __main__ does not unpickle in the other process).
    """

    def __init__(self, conn: Connection, ready: Mapping[str, Any]) -> None:
        self.ready = dict(ready)
        self.endpoints: dict[str, str] = ready["endpoints"]
        self.cert_path: str = ready["cert_path"]
        self._conn = conn
        self._lock = threading.Lock()

    @classmethod
    @contextlib.contextmanager
    def running(cls, make_host: Callable[..., Any], *args: Any) -> Iterator[Self]:
        context = multiprocessing.get_context("spawn")  # no copy of this process's threads
        conn, child_conn = context.Pipe()
        process = context.Process(
            target=serve_clouds, args=(child_conn, make_host, args), name="bench-clouds"
        )
        process.start()
        child_conn.close()
        try:
            if not conn.poll(CLOUDS_START_TIMEOUT_S):
                raise RuntimeError("the simulated clouds did not start")
            ready = conn.recv()
            if "error" in ready:
                raise RuntimeError(f"the simulated clouds did not start: {ready['error']}")
            yield cls(conn, ready)
        finally:
            with contextlib.suppress(OSError, EOFError):
                conn.send("stop")
                if conn.poll(JOIN_TIMEOUT_S):
                    conn.recv()
            process.join(JOIN_TIMEOUT_S)
            if process.is_alive():
                process.terminate()
                process.join(JOIN_TIMEOUT_S)
            conn.close()

    def ask(self, method: str, *args: Any) -> Any:
        with self._lock:
            self._conn.send((method, args))
            status, value = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"the simulated clouds failed: {value}")
        return value


# -- config and database ------------------------------------------------------------------------


def provider_entries(
    endpoints: Mapping[str, str],
    cert_path: str,
    regions: Mapping[str, Sequence[str]] | None = None,
    gate: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The three providers' config entries, pointed at the simulated clouds. `regions` per cloud
    defaults to MACHINES' one region (zone on GCE); `gate` overrides gate settings."""
    providers: list[dict[str, Any]] = [
        {"id": PROVIDER_IDS["aws"], "kind": "aws", "endpoint": endpoints["aws"]},
        {
            "id": PROVIDER_IDS["gcp"],
            "kind": "gcp",
            "project": GCP_PROJECT,
            "endpoint": endpoints["gcp"],
        },
        {
            "id": PROVIDER_IDS["azure"],
            "kind": "azure",
            "subscription_id": AZURE_SUBSCRIPTION,
            "resource_group": AZURE_RESOURCE_GROUP,
            "endpoint": endpoints["azure"],
            "ca_bundle": cert_path,
        },
    ]
    for provider in providers:
        kind = provider["kind"]
        chosen = list(regions[kind]) if regions else [MACHINES[kind][0]]
        provider.update(regions=chosen, credentials="simulated")
        if gate:
            provider["gate"] = dict(gate)
    return providers


def parse_config(raw: Mapping[str, Any], db_url: str, source: str) -> Config:
    return config_module.parse(dict(raw), environ={"DATABASE_URL": db_url}, source=source)


def sync_pools(engine: Engine, config: Config) -> None:
    plan = plan_sync(
        config,
        pool_store.load_pools(engine),
        pool_store.load_launch_configs(engine),
        pool_store.load_scan_units(engine),
    )
    pool_store.apply_sync(engine, plan)


@contextlib.contextmanager
def fresh_database(
    server: PostgresServer, side: str, *, pool_size: int = 10
) -> Iterator[tuple[Engine, str]]:
    """A new, migrated database for one side: (engine, url); dropped on the way out."""
    database = f"wm_bench_{side}_{uuid.uuid4().hex[:8]}"
    create_database(server.url, database)
    try:
        db_url = with_database(server.url, database)
        engine = make_engine(db_url, application_name=f"bench-{side}", pool_size=pool_size)
        try:
            migrate.upgrade(engine)
            yield engine, db_url
        finally:
            engine.dispose()
    finally:
        drop_database(server.url, database)


# -- figures and output -------------------------------------------------------------------------


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def ratios(wm: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, float | None]:
    """baseline / wm per figure; null where wm's is 0, either is null, or the figure is a
    yes/no."""
    out: dict[str, float | None] = {}
    for name, ours in wm.items():
        theirs = baseline.get(name)
        yes_no = isinstance(ours, bool) or isinstance(theirs, bool)
        usable = not yes_no and ours not in (None, 0) and theirs is not None
        out[name] = round(theirs / ours, 3) if usable else None
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}"


def table(result: Mapping[str, Any]) -> str:
    """wm, baseline and their ratio, one figure a row."""
    rows = [("figure", "wm", "baseline", "baseline/wm")]
    for name in result["wm"]:
        cells = (result["wm"][name], result["baseline"][name], result["ratio"][name])
        rows.append((name, *(_cell(v) for v in cells)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        row[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(row[1:], widths[1:], strict=True))
        for row in rows
    ]
    return "\n".join(lines)


def emit(result: Mapping[str, Any], tables: str, output: Path) -> None:
    """The table(s) and the JSON to stdout, the JSON to `output`."""
    print(tables)
    print(json.dumps(result, indent=2))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}", file=sys.stderr)


class EventCounter(logging.Handler):
    """Counts wm's log lines at WARNING and above, by event."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[f"{record.levelname.lower()}:{getattr(record, 'wm_event', record.msg)}"] += 1


@contextlib.contextmanager
def wm_logging(log_path: Path | None) -> Iterator[EventCounter]:
    """wm's log lines go to a counter (and a JSON-lines file if asked), not to the terminal."""
    logger = logging.getLogger("wm")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    counter = EventCounter()
    logger.handlers[:] = [counter]
    logger.setLevel(logging.INFO if log_path else logging.WARNING)
    logger.propagate = False
    file_handler = None
    if log_path is not None:
        file_handler = logging.FileHandler(log_path, mode="w")
        file_handler.setFormatter(JsonLineFormatter())
        logger.addHandler(file_handler)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield counter
    finally:
        if file_handler is not None:
            file_handler.close()
        logger.handlers[:], logger.level, logger.propagate = saved
