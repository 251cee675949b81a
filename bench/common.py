"""What the benchmarks share: the fleet mix, what reaches the simulated clouds (create calls,
their CPU time), the simulated clouds in a process of their own, the providers' config, a fresh
database per side, the provisioning loops, what is counted in wm's own process (statements,
memory), wm's logging, and how results are printed and written (see bench/README.md)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import io
import json
import logging
import math
import multiprocessing
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl

from sqlalchemy import Engine
from sqlalchemy import event as sa_event

from procs.runtime import RERUN_DELAY_S
from wm.config import loader as config_module
from wm.config.loader import Config
from wm.db import migrate
from wm.db import pools as pool_store
from wm.db.engine import create_database, drop_database, make_engine, with_database
from wm.errors import WmError
from wm.ops.telemetry import JsonLineFormatter
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.config_tables import OldPool, OldProvider, convert
from wm.pools.definition import PoolDefinition, parse_pool_definition
from wm.providers.base import TAG_POOL
from wmsim.azure.launch_configs import default_subnet_id
from wmsim.gcp.identity import service_account_id
from wmsim.postgres import PostgresServer, find_or_start

WsgiApp = Callable[..., Any]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_DIR = Path(__file__).resolve().parents[1]
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
BENCH_OWNER = "bench@example.com"
MACHINES = {  # cloud -> (region or zone, machine type, image)
    "aws": ("us-east-1", "m5.large", "ami-0abcdef1234567890"),
    "gcp": ("us-central1-a", "e2-small", "projects/debian-cloud/global/images/family/debian-12"),
    "azure": ("eastus", "Standard_D2s_v5", "Canonical:ubuntu-24_04-lts:server:latest"),
}
AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-0000000be7c4"
AZURE_RESOURCE_GROUP = "wm-bench"
GCP_PROJECT = "wm-bench"
# What GCE worker VMs run as: a provider whose workers register must name one.
GCP_WORKER_ACCOUNT = f"wm-workers@{GCP_PROJECT}.iam.gserviceaccount.com"
JOIN_TIMEOUT_S = 30.0
CLOUDS_START_TIMEOUT_S = 60.0
QUIET_LOGGERS = ("azure", "botocore", "urllib3", "werkzeug", "google")


# -- what reaches the simulated clouds --------------------------------------------------------


CREATE_OPERATIONS = frozenset(
    {"RunInstances", "instances.insert", "instances.bulkInsert", "VirtualMachines_CreateOrUpdate"}
)


@dataclass(frozen=True)
class CreateCall:
    """One create request as it reached a simulated cloud."""

    at: float  # time.monotonic() on arrival, before the sim's latency and answer
    pool_id: str | None  # from the request's pool tag
    vms: int  # instances it asks for (EC2 MaxCount; one elsewhere)
    key: str  # what makes a repeat of it the same request (client token, VM name)
    ok: bool  # answered 2xx
    answered: float  # time.monotonic() when the sim had its answer


class CreateRecorder:
    """A WSGI middleware recording the create calls of one simulated cloud."""

    def __init__(self, cloud: str, app: Callable[..., Any]) -> None:
        self.cloud = cloud
        self.calls: list[CreateCall] = []
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        arrived = time.monotonic()
        parsed = parse_create(self.cloud, environ)
        if parsed is None:
            return self._app(environ, start_response)
        statuses: list[str] = []

        def capture(status: str, headers: list, exc_info: Any = None) -> Any:
            statuses.append(status)
            return start_response(status, headers, exc_info)

        answer = self._app(environ, capture)
        pool_id, vms, key = parsed
        ok = bool(statuses) and statuses[-1].startswith("2")
        with self._lock:
            self.calls.append(CreateCall(arrived, pool_id, vms, key, ok, time.monotonic()))
        return answer


def read_body(environ: dict[str, Any]) -> bytes:
    """Read the request body and put it back for the sim."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    data = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(data)
    return data


def parse_create(cloud: str, environ: dict[str, Any]) -> tuple[str | None, int, str] | None:
    """(pool id, VMs, key) when the request is a create call, else None."""
    method, path = environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")
    if cloud == "aws" and method == "POST" and not path.startswith(("/_sim", "/moto-api")):
        form = dict(parse_qsl(read_body(environ).decode(errors="replace")))
        if form.get("Action") != "RunInstances":
            return None
        pool = next(
            (
                form.get(key[: -len("Key")] + "Value")
                for key, value in form.items()
                if value == TAG_POOL and re.fullmatch(r"TagSpecification\.\d+\.Tag\.\d+\.Key", key)
            ),
            None,
        )
        return pool, int(form.get("MaxCount", "1")), form.get("ClientToken", "")
    if cloud == "gcp" and method == "POST" and re.fullmatch(r".*/zones/[^/]+/instances", path):
        body = json.loads(read_body(environ) or b"{}")
        items = {i.get("key"): i.get("value") for i in body.get("metadata", {}).get("items", [])}
        pool = items.get(TAG_POOL) or body.get("labels", {}).get(TAG_POOL)
        return pool, 1, str(body.get("name", ""))
    vm_path = re.search(r"/providers/microsoft\.compute/virtualmachines/([^/]+)$", path, re.I)
    if cloud == "azure" and method == "PUT" and vm_path:
        body = json.loads(read_body(environ) or b"{}")
        return body.get("tags", {}).get(TAG_POOL), 1, vm_path.group(1).lower()
    return None


class CpuMeter:
    """A WSGI middleware summing the CPU time a simulated cloud's threads spend answering (its
    simulated latency is slept, so it is not counted): how much of a benchmark's wall time the
    simulation itself took."""

    def __init__(self, app: WsgiApp) -> None:
        self.cpu_s = 0.0
        self.requests = 0
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started = time.thread_time()
        try:
            return self._app(environ, start_response)
        finally:
            spent = time.thread_time() - started
            with self._lock:
                self.cpu_s += spent
                self.requests += 1


# -- the simulated clouds, in a process of their own --------------------------------------------


def wrap_app(sim: Any, wrap: Callable[[WsgiApp], WsgiApp]) -> WsgiApp:
    """Put a WSGI middleware in front of a started sim; returns the middleware.

    The one reach into a sim's insides: its werkzeug server's app, wrapped before any request
    (wmsim/wsgi.py: ServerThread._server is a BaseWSGIServer).
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
    clouds: Sequence[str] = CLOUDS,
) -> list[dict[str, Any]]:
    """The providers' config entries for `clouds` (all three by default), pointed at the
    simulated clouds. `regions` per cloud defaults to MACHINES' one region (zone on GCE);
    `gate` overrides gate settings."""
    providers: list[dict[str, Any]] = [
        {"id": PROVIDER_IDS["aws"], "kind": "aws", "endpoint": endpoints.get("aws")},
        {
            "id": PROVIDER_IDS["gcp"],
            "kind": "gcp",
            "project": GCP_PROJECT,
            "endpoint": endpoints.get("gcp"),
            "worker_service_account_email": GCP_WORKER_ACCOUNT,
            "worker_service_account_id": service_account_id(GCP_WORKER_ACCOUNT),
        },
        {
            "id": PROVIDER_IDS["azure"],
            "kind": "azure",
            "subscription_id": AZURE_SUBSCRIPTION,
            "resource_group": AZURE_RESOURCE_GROUP,
            "endpoint": endpoints.get("azure"),
            "ca_bundle": cert_path,
        },
    ]
    providers = [p for p in providers if p["kind"] in clouds]
    for provider in providers:
        kind = provider["kind"]
        chosen = list(regions[kind]) if regions else [MACHINES[kind][0]]
        provider.update(regions=chosen, credentials="simulated")
        if gate:
            provider["gate"] = dict(gate)
    return providers


@dataclass(frozen=True)
class BenchConfig:
    """A benchmark's config and its pools, written in the short old `[[pools]]` form and
    applied as the Taskcluster definitions `wm pools convert` makes of them. Reads of anything
    else go to the config."""

    config: Config
    pools: tuple[OldPool, ...]

    def pool(self, pool_id: str) -> OldPool:
        return next(p for p in self.pools if p.id == pool_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.config, name)


def parse_config(raw: Mapping[str, Any], db_url: str, source: str) -> BenchConfig:
    data = {k: v for k, v in raw.items() if k != "pools"}
    config = config_module.parse(data, environ={"DATABASE_URL": db_url}, source=source)
    pools = tuple(OldPool.model_validate(p) for p in raw.get("pools", []))
    return BenchConfig(config, pools)


def bench_definitions(bench: BenchConfig) -> list[PoolDefinition]:
    raw = [p.model_dump() for p in bench.pools]
    providers = {p.id: OldProvider(p.kind, azure_subnet(p)) for p in bench.config.providers}
    conversion = convert(raw, providers, owner=BENCH_OWNER)
    if conversion.problems:
        raise WmError("; ".join(conversion.problems))
    kinds = bench.config.provider_kinds()
    return [parse_pool_definition(d["workerPoolId"], _body(d), kinds) for d in conversion.documents]


def azure_subnet(provider: Any) -> str | None:
    if provider.kind != "azure":
        return None
    return default_subnet_id(provider.subscription_id, provider.resource_group)


def _body(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != "workerPoolId"}


def sync_pools(engine: Engine, bench: BenchConfig) -> None:
    definitions = bench_definitions(bench)
    registers = {p.id: p.workers_register for p in bench.config.providers}
    for pool in bench.pools:
        if not pool.requires_registration:
            registers[pool.provider] = False
    apply_change(
        engine, ApplyDefinitions(tuple(definitions), prune=True), workers_register=registers
    )
    pool_store.ensure_scan_units(
        engine, [(p.id, r) for p in bench.config.providers for r in p.regions]
    )


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


# -- provisioning loops --------------------------------------------------------------------------


class PassLoops:
    """One thread per provider running passes every `interval_s`, timed as the provisioner
    process's jobs are (procs/runtime.py: APScheduler interval jobs, max_instances=1,
    coalesce): a run that falls due while a pass runs is skipped, not queued; `wake` makes a run
    due now, and the interval restarts from it; a wake while a pass runs makes one more run due
    right after it (RERUN_DELAY_S), since that pass may have read the queue before the news."""

    def __init__(
        self,
        run_pass: Callable[[str], object],
        provider_ids: list[str],
        interval_s: float,
        first_at: float,
    ) -> None:
        self.passes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._run_pass = run_pass
        self._interval_s = interval_s
        self._first_at = first_at
        self._stop = threading.Event()
        self._wakes = {pid: threading.Event() for pid in provider_ids}
        self._woken_at = dict.fromkeys(provider_ids, 0.0)  # monotonic time of the last wake
        self._threads = [
            threading.Thread(target=self._loop, args=(pid,), name=f"pass-{pid}", daemon=True)
            for pid in provider_ids
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wake(self, provider_id: str) -> None:
        if provider_id in self._wakes:
            self._woken_at[provider_id] = time.monotonic()
            self._wakes[provider_id].set()

    def stop(self) -> list[str]:
        """Stop and join; return the names of threads that did not end in time."""
        self._stop.set()
        for event in self._wakes.values():
            event.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in self._threads if t.is_alive()]

    def _loop(self, provider_id: str) -> None:
        wake, due = self._wakes[provider_id], self._first_at
        while not self._stop.is_set():
            fired = due
            if wake.wait(max(0.0, due - time.monotonic())):
                fired = self._woken_at[provider_id]
            if self._stop.is_set():
                return
            wake.clear()
            try:
                self._run_pass(provider_id)
            except Exception:
                self.errors[provider_id] += 1
                logging.getLogger("wm").exception("bench-pass-failed")
            self.passes[provider_id] += 1
            if wake.is_set():  # woken while the pass ran: once more, right after it
                wake.clear()
                due = time.monotonic() + RERUN_DELAY_S
                continue
            due = fired + self._interval_s
            while due <= time.monotonic():  # runs due while the pass ran were skipped
                due += self._interval_s


# -- what is counted in wm's own process ---------------------------------------------------------


class StatementCounter:
    """Counts the SQL statements an engine sends (SQLAlchemy's before_cursor_execute event),
    while it is entered; thread-safe, so concurrent scans count together."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.count = 0
        self._lock = threading.Lock()

    def _seen(self, *_args: Any) -> None:
        with self._lock:
            self.count += 1

    def __enter__(self) -> Self:
        sa_event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *_exc: object) -> None:
        sa_event.remove(self.engine, "before_cursor_execute", self._seen)


_STATUS_KIB = re.compile(r"^(VmRSS|VmHWM):\s+(\d+) kB", re.M)


def _memory_kib() -> dict[str, int]:
    with open("/proc/self/status") as status:
        return {name: int(kib) for name, kib in _STATUS_KIB.findall(status.read())}


@dataclass
class PeakMemory:
    """This process's resident memory before a measured piece of work and at its peak (MiB)."""

    before_mib: float = 0.0
    peak_mib: float = 0.0

    @property
    def growth_mib(self) -> float:
        return self.peak_mib - self.before_mib


@contextlib.contextmanager
def peak_memory() -> Iterator[PeakMemory]:
    """Measure resident memory around a block (Linux): garbage is collected and freed heap
    given back first, then the kernel's high-water mark (VmHWM) is reset, so the peak is this
    block's. Memory an earlier block freed but the allocator kept can be reused unseen, so the
    growth of a later, larger block is a lower bound."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(libc).malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset VmHWM to the current resident size
    memory = PeakMemory(before_mib=_memory_kib()["VmRSS"] / 1024)
    try:
        yield memory
    finally:
        memory.peak_mib = _memory_kib()["VmHWM"] / 1024


# -- a config file for wm's own processes ----------------------------------------------------------


def toml_text(data: Mapping[str, Any]) -> str:
    """A config as TOML, every table inline: enough for wm's config file (strings, numbers,
    booleans, lists and tables)."""

    def value(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, str):
            return json.dumps(item)  # JSON's string escapes are TOML basic-string escapes
        if isinstance(item, int | float):
            return repr(item)
        if isinstance(item, Mapping):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(v)}" for k, v in item.items()) + " }"
        if isinstance(item, Sequence):
            return "[" + ", ".join(value(v) for v in item) + "]"
        raise TypeError(f"no TOML for {type(item).__name__}")

    return "".join(f"{json.dumps(key)} = {value(item)}\n" for key, item in data.items())


# -- figures and output -------------------------------------------------------------------------


def task_latencies(
    calls: list[CreateCall], submitted: Mapping[str, float], demand: Mapping[str, int]
) -> list[float]:
    """Seconds from submission to the create call covering each task; inf where none did."""
    by_pool: dict[str, list[CreateCall]] = defaultdict(list)
    seen: set[str] = set()
    for call in sorted(calls, key=lambda c: c.at):
        if call.ok and call.pool_id in demand and call.key not in seen:
            seen.add(call.key)
            by_pool[call.pool_id].append(call)
    latencies: list[float] = []
    for pool_id, wanted in demand.items():
        covered = 0
        for call in by_pool[pool_id]:
            take = min(call.vms, wanted - covered)
            latencies += [call.at - submitted[pool_id]] * take
            covered += take
            if covered == wanted:
                break
        latencies += [math.inf] * (wanted - covered)
    return latencies


def percentile(ordered: list[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values; None when empty or on an uncovered task."""
    if not ordered:
        return None
    value = ordered[max(0, math.ceil(q * len(ordered)) - 1)]
    return None if math.isinf(value) else value


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


def cell(value: Any) -> str:
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
        rows.append((name, *(cell(v) for v in cells)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        row[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(row[1:], widths[1:], strict=True))
        for row in rows
    ]
    return "\n".join(lines)


def measured_on(repo: Path = REPO_DIR) -> str | None:
    """The git commit the figures are measured on (short hash, `-dirty` when the work tree
    differs from it), so that `bench.check` can say which code a figure belongs to; null
    outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=repo).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def emit(result: Mapping[str, Any], tables: str, output: Path) -> None:
    """The table(s) and the JSON to stdout, the JSON, with the commit it was measured on, to
    `output`."""
    result = {**result, "commit": measured_on()}
    print(tables)
    print(json.dumps(result, indent=2))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}", file=sys.stderr)


SIDES = ("wm", "baseline")


def run_sides(
    run_side: Callable[[str, PostgresServer], dict[str, Any]],
    log_path: Path | None,
    sides: Sequence[str] = SIDES,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, int]]]:
    """Run each side, wm first, on the Postgres found or started (and stopped after): their
    figures, and wm's log lines at warning and above per side (to `log_path`.SIDE.log too)."""
    results: dict[str, dict[str, Any]] = {}
    warnings: dict[str, dict[str, int]] = {}
    server = find_or_start()
    try:
        for name in sides:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            with wm_logging(log_path.with_suffix(f".{name}.log") if log_path else None) as events:
                results[name] = run_side(name, server)
            warnings[name] = dict(events.counts)
    finally:
        server.stop()
    return results, warnings


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
