"""The worker-manager API as it runs in production, for chaos and acceptance tests: `wm run web`
as an OS process on a real Postgres, trusting the three simulated clouds' identity keys, with VMs
those clouds really launched (the real providers, driven by the real provisioner pass) waiting
to register, and the real `taskcluster` client to call it.

The web process is started once per test module (start-up costs about a second); each scenario
launches its own workers, so scenarios never share a worker row.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, text

from tests.support.stack import Stack, WmProcess, aws_provider, azure_provider, gcp_provider, pool
from wm.db.engine import create_database, drop_database, make_engine, with_database
from wm.db.pools import load_launch_configs, load_pools
from wm.db.worker_writes import insert_intents, record_launches
from wm.db.workers import list_workers
from wm.kinds import describe
from wm.model import WorkerRecord
from wm.providers import build_provider
from wm.providers.base import Provider
from wm.provisioning.launch_outcomes import judge_results
from wm.provisioning.pool_plan import batch_of as provisioner_batch
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.fleet import proof_fetcher
from wmsim.gcp.gce import SimGce
from wmsim.postgres import free_port

KINDS = ("aws", "gcp", "azure")
POOLS = {"aws": "chaos/aws", "gcp": "chaos/gcp", "azure": "chaos/azure"}
OPERATOR_TOKEN = "operator-token-for-chaos-tests"
OPERATOR_CLIENT = "static/wm-operator"  # wm's standalone operator client (wm/api/authn.py)
PREFIX = "/api/worker-manager/v1"
HTTP_TIMEOUT_S = 30.0
WEB_START_S = 60.0


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def refusal(self) -> tuple[int, str, str]:
        """(status, Taskcluster error code, message without the trailer that names the time)."""
        body = self.json()
        return self.status, body["code"], body["message"].split("\n\n---\n", 1)[0]


def send_chunked(
    base_url: str, method: str, path: str, opening: bytes, total_bytes: int
) -> tuple[int, bytes]:
    """A body sent with Transfer-Encoding: chunked (no Content-Length warns the server):
    `opening`, then about `total_bytes` of blanks. Returns the answer's status and body."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    chunk = b" " * 8192

    def body() -> Iterator[bytes]:
        yield opening
        for _ in range(total_bytes // len(chunk)):
            yield chunk

    # The server may answer and close before the whole body is sent.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        connection.request(
            method,
            path,
            body=body(),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
    try:
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def http_call(
    base_url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = HTTP_TIMEOUT_S,
) -> Reply:
    """One request on a fresh connection, as a booting VM makes it; never raises on 4xx/5xx."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    sent = {"Content-Type": "application/json", **(headers or {})}
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return Reply(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        )
    finally:
        connection.close()


@dataclass
class ApiStack:
    """The web process, its database and the clouds its workers run on."""

    stack: Stack
    web: WmProcess
    base_url: str
    engine: Engine
    sims: Mapping[str, Any]  # kind -> SimEc2 / SimGce / SimArm
    providers: Mapping[str, Provider] = field(default_factory=dict)  # kind -> real provider

    # -- workers --------------------------------------------------------------------------

    def launch(
        self,
        kind: str,
        count: int,
        *,
        registration_timeout_s: float | None = None,
        pool_id: str | None = None,
    ) -> list[WorkerRecord]:
        """`count` new workers of the kind's pool, launched in the provisioner's order: intent
        rows committed first, then the cloud's create through the real provider, then the cloud
        ids and launch data recorded. Returns the rows, requested and waiting to register.

        (Not a provisioner pass: its estimator counts requested workers as idle capacity, so
        how many a pass launches depends on every earlier scenario of the module.)"""
        pool = next(p for p in load_pools(self.engine) if p.pool_id == (pool_id or POOLS[kind]))
        (lc,) = [
            c
            for c in load_launch_configs(self.engine, include_archived=False)
            if c.pool_id == pool.pool_id
        ]
        rows, batch = provisioner_batch(pool, lc, count)  # the provisioner's own ids and tokens
        if registration_timeout_s is not None:
            rows = [replace(r, expires_in_s=registration_timeout_s) for r in rows]
        insert_intents(self.engine, rows)
        results = self.providers[kind].create(batch)
        assert all(r.cloud_id and r.error is None for r in results), results
        outcomes, _ = judge_results(
            self.providers[kind].id, [batch], {r.worker_id: r for r in results}
        )
        record_launches(self.engine, outcomes)
        wanted = {r.worker_id for r in rows}
        launched = [
            w for w in list_workers(self.engine, pool_id=pool.pool_id) if w.worker_id in wanted
        ]
        assert len(launched) == count and all(w.cloud_id for w in launched)
        return launched

    def proof(self, worker: WorkerRecord) -> dict[str, Any]:
        """The worker's genuine proof, fetched from its cloud's (simulated) metadata service over
        HTTP, exactly as the simulated agent fetches it."""
        config = self.stack.config()
        fetch = proof_fetcher(
            config.provider(worker.provider_id),
            worker.worker_id,
            worker.worker_group,
            worker.cloud_id or "",
            config.root_url,
        )
        return fetch()

    def register_body(self, worker: WorkerRecord, proof: Any) -> dict[str, Any]:
        return {
            "workerPoolId": worker.pool_id,
            "providerId": worker.provider_id,
            "workerGroup": worker.worker_group,
            "workerId": worker.tc_worker_id,
            "workerIdentityProof": proof,
        }

    def register(self, worker: WorkerRecord, proof: Any) -> Reply:
        return self.post(f"{PREFIX}/worker/register", self.register_body(worker, proof))

    def client(self, credentials: Mapping[str, str] | None = None) -> Any:
        """The real `taskcluster.WorkerManager` for this web process (no retries: a test sees
        every answer)."""
        import taskcluster

        options: dict[str, Any] = {"rootUrl": self.base_url, "maxRetries": 0}
        if credentials:
            options["credentials"] = dict(credentials)  # the client encodes it in place
        return taskcluster.WorkerManager(options)

    def operator(self) -> Any:
        return self.client({"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN})

    def signed(
        self,
        credentials: Mapping[str, str],
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """A request Hawk-signed as the taskcluster client signs it, on any path and body (the
        client itself escapes and validates what it sends)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        sent = {"Content-Type": "application/json", **(headers or {})}
        auth = hawk_header(credentials, method, self.base_url + path, data, sent["Content-Type"])
        return http_call(
            self.base_url, method, path, raw=data, headers={**sent, "Authorization": auth}
        )

    def operator_call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
        operator = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
        return self.signed(operator, method, path, body, **kwargs)

    def post(self, path: str, body: Any, **kwargs: Any) -> Reply:
        return http_call(self.base_url, "POST", path, body, **kwargs)

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return http_call(self.base_url, method, path, body, **kwargs)

    # -- what the database and the process show ----------------------------------------------

    def row(self, worker_id: str) -> dict[str, Any]:
        """The worker's whole row, every column, as Postgres holds it."""
        with self.engine.connect() as conn:
            found = conn.execute(
                text("SELECT * FROM workers WHERE worker_id = :w"), {"w": worker_id}
            ).mappings()
            return dict(found.one())

    def all_stored_text(self) -> str:
        """Every row of every table as text: what a secret or a proof must never be found in."""
        with self.engine.connect() as conn:
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            ).scalars()
            dumps = [
                conn.execute(
                    text(f"SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM \"{name}\" t")
                ).scalar_one()
                for name in list(tables)
            ]
        return "\n".join(dumps)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a counter's samples from the web process's /metrics (0 when absent)."""
        reply = self.call("GET", "/metrics")
        assert reply.status == 200
        total = 0.0
        for line in reply.body.decode().splitlines():
            match = re.fullmatch(rf"{re.escape(name)}(?:\{{(.*)\}})? (\S+)", line)
            if not match:
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(match.group(2))
        return total

    def log_text(self) -> str:
        return "".join(self.web.raw)

    def events(self, name: str) -> list[dict[str, Any]]:
        return self.web.events(name)


def hawk_header(
    credentials: Mapping[str, str], method: str, url: str, content: bytes, content_type: str
) -> str:
    """The Authorization header the taskcluster client would send: Hawk, with the certificate
    of temporary credentials in `ext`."""
    import base64

    import mohawk

    ext = None
    if credentials.get("certificate"):
        certificate = json.loads(credentials["certificate"])
        ext = base64.b64encode(json.dumps({"certificate": certificate}).encode()).decode()
    sender = mohawk.Sender(
        {"id": credentials["clientId"], "key": credentials["accessToken"], "algorithm": "sha256"},
        url,
        method,
        content=content,
        content_type=content_type,
        ext=ext,
    )
    return sender.request_header


def secret_hash(secret: str) -> str:
    """How a secret is stored: its SHA-256 (wm/api/routers/workers.py); recomputed here, not
    imported, so a change in what is stored shows up as a failing test."""
    return hashlib.sha256(secret.encode()).hexdigest()


def provider_entries(sims: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The three providers, each trusting its simulated cloud's identity keys, as the demo's
    config.toml trusts them."""
    return [
        aws_provider(sims["aws"], identity_certificate=str(sims["aws"].identity_trust_path)),
        gcp_provider(sims["gcp"], identity_jwks=str(sims["gcp"].identity_trust_path)),
        azure_provider(sims["azure"], identity_roots=[str(sims["azure"].identity_trust_path)]),
    ]


@contextlib.contextmanager
def database(pg_server_url: str, template: str) -> Iterator[str]:
    """A database of the module's own, copied from the migrated template."""
    name = f"wm_chaos_{uuid.uuid4().hex[:12]}"
    create_database(pg_server_url, name, template=template)
    try:
        yield with_database(pg_server_url, name)
    finally:
        drop_database(pg_server_url, name)


@contextlib.contextmanager
def running_clouds(arm: SimArm) -> Iterator[dict[str, Any]]:
    """Fresh simulated EC2 and GCE, and the session's ARM server reset (its TLS set-up is
    made once per session)."""
    ec2, gce = SimEc2(seed=20261202).start(), SimGce(seed=20261202).start()
    arm.reset()
    try:
        yield {"aws": ec2, "gcp": gce, "azure": arm}
    finally:
        arm.reset()
        gce.stop()
        ec2.stop()


@contextlib.contextmanager
def api_stack(
    tmp: Path,
    db_url: str,
    sims: Mapping[str, Any],
    *,
    max_capacity: int = 5000,
    pool_changes: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    extra_providers: Sequence[Mapping[str, Any]] = (),
    config_top: Mapping[str, Any] | None = None,
) -> Iterator[ApiStack]:
    """Write the config, sync its pools, start `wm run web` and wait until it is healthy.
    `extra_providers`: more config entries (a static provider), with no pools; `config_top`:
    more top-level config (a [take_over] table)."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    providers = provider_entries(sims)
    pools = [
        pool(POOLS[p["kind"]], p, max_capacity=max_capacity, **(pool_changes or {}))
        for p in providers
    ]
    every = [*providers, *map(dict, extra_providers)]
    top = {"web": {"port": port}, "root_url": base_url, **(config_top or {})}
    stack = Stack.write(tmp, db_url, every, pools, **top)
    engine = make_engine(db_url, application_name="chaos-test")
    stack.sync_pools(engine)
    config = stack.config()
    built = {
        p.kind: build_provider(p, config.deployment_id)
        for p in config.providers
        if describe(p.kind).scanned  # a static provider has no cloud to launch in
    }
    process_env = {"WM_OPERATOR_TOKEN": OPERATOR_TOKEN, **(env or {})}
    with _environment(process_env):
        web = stack.start("web")
    api = ApiStack(stack, web, base_url, engine, sims, built)
    try:
        web.wait_for(lambda: _healthy(base_url), WEB_START_S, "the web process to answer")
        yield api
    finally:
        stack.stop_all()
        for provider in built.values():
            provider.close()
        engine.dispose()


@contextlib.contextmanager
def module_api(
    pg_server_url: str, template: str, arm: SimArm, tmp: Path, **changes: Any
) -> Iterator[ApiStack]:
    """All of it for one test module: its own database, fresh clouds, `wm run web`."""
    with (
        database(pg_server_url, template) as url,
        running_clouds(arm) as sims,
        api_stack(tmp, url, sims, **changes) as stack,
    ):
        yield stack


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    # WmProcess.start copies os.environ: set what the platform would set, then restore.
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _healthy(base_url: str) -> bool:
    try:
        return http_call(base_url, "GET", "/healthz", timeout_s=2).status == 200
    except OSError:
        return False


def in_parallel(count: int, action: Callable[[int], Any]) -> list[Any]:
    """Run `action(i)` for i in range(count) on `count` threads released at the same moment."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = action(index)
        except Exception as exc:  # kept, so the test shows what a client saw
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@dataclass
class Listener:
    """A real HTTP server on 127.0.0.1 that counts every connection made to it: where a forged
    proof's URLs point, so that "nothing was fetched" is seen on the wire."""

    host_port: str
    connections: list[str]

    @property
    def url(self) -> str:
        return f"http://{self.host_port}"


@contextlib.contextmanager
def listener() -> Iterator[Listener]:
    import socket

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.05)
    seen: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, address = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen.append(f"{address[0]}:{address[1]}")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield Listener(f"127.0.0.1:{server.getsockname()[1]}", seen)
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """An ASGI app served by uvicorn on a real port, in this process; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
