"""The web process: Taskcluster's worker-manager API on $PORT (uvicorn), /healthz and /metrics.

Behind a Taskcluster deployment (TASKCLUSTER_CLIENT_ID, TASKCLUSTER_ACCESS_TOKEN and
TASKCLUSTER_ROOT_URL set) wm signs workers' credentials with that client and asks the
deployment's auth service about any credentials it did not mint, that client's own included;
WM_OPERATOR_TOKEN is refused then. Standalone (unset) it signs with its own deployment key and
knows only its workers and the operator client.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import signal
import threading
from collections.abc import Iterator

import uvicorn

from procs.ports import bind_web
from procs.providers import build_verifiers
from wm.api.app import MAX_IN_FLIGHT, create_app
from wm.api.authn import OPERATOR_BEHIND_TASKCLUSTER, Authenticator, AuthService, IssuerSource
from wm.config.loader import Config
from wm.db import schema
from wm.db.engine import make_engine
from wm.errors import ConfigError, SchemaNotReady, WmError
from wm.ops.sentry import init_sentry
from wm.ops.telemetry import configure_logging, log
from wm.take_over.legacy_forwarder import LegacyForwarder

# Connections kept open; the engine may open POOL_MAX_OVERFLOW more (health checks). API
# requests in flight are bounded by the same number (more are shed with 429), so a request in
# flight never queues for a connection and a boot storm never grows the database's load.
# 20, measured (bench/README.md, "registration"): a process whose calls take a few ms of CPU
# each gets no more through with more in flight (40 as 20); with 10 a storm's workers were shed
# more often and its p95 was two Retry-Afters (4 s) instead of one.
WEB_DB_POOL_SIZE = MAX_IN_FLIGHT
SHUTDOWN_GRACE_S = 5


def legacy(config: Config, issuer: IssuerSource) -> LegacyForwarder | None:
    """The legacy worker-manager during a take-over; its side of the merged lists is read
    with wm's Taskcluster client when it has one (the deployment's worker-manager client)."""
    if config.take_over is None:
        return None
    env = config.env
    given = env.taskcluster_client_id and env.taskcluster_access_token
    return LegacyForwarder(config.take_over.legacy_url, issuer.get() if given else None)


def behind_taskcluster(config: Config) -> bool:
    """Whether the deployment's auth service (at TASKCLUSTER_ROOT_URL) says who clients are."""
    env = config.env
    return bool(
        env.taskcluster_client_id and env.taskcluster_access_token and env.taskcluster_root_url
    )


def main(config: Config, *, metrics_port: int | None = None) -> int:
    # /metrics is served by the API itself: metrics_port is not used by this process.
    configure_logging()
    env = config.env
    init_sentry(env.sentry_dsn, "web", config.provider_kinds(), env.sentry_repeat_window_s)
    if not env.database_url:
        raise WmError("DATABASE_URL is not set")
    if behind_taskcluster(config) and env.operator_token:
        raise ConfigError([OPERATOR_BEHIND_TASKCLUSTER], config.source)
    engine = make_engine(env.database_url, application_name="wm-web", pool_size=WEB_DB_POOL_SIZE)
    # Started beside `release`, the schema may not be there yet: the server answers at once,
    # not ready (503) until a watcher finds the schema wm needs; past the wait, it exits. One
    # look first, so that a process whose schema is there is never seen not ready.
    readiness = schema.Readiness(schema.look(engine))
    # Azure's verifier looks VMs up in ARM: those calls draw from the shared budget too.
    verifiers = build_verifiers(config.providers, config.deployment_id, config.root_url, engine)
    issuer = IssuerSource(engine, env.taskcluster_client_id, env.taskcluster_access_token)
    auth_service = None
    if behind_taskcluster(config):
        assert env.taskcluster_root_url and env.taskcluster_client_id
        assert env.taskcluster_access_token
        auth_service = AuthService(
            env.taskcluster_root_url, env.taskcluster_client_id, env.taskcluster_access_token
        )
    app = create_app(
        engine,
        verifiers,
        provider_kinds=config.provider_kinds(),
        provider_regions=config.scanned_regions(),
        workers_register={p.id: p.workers_register for p in config.providers},
        deployment_id=config.deployment_id,
        root_url=config.root_url,
        authenticator=Authenticator(
            issuer, operator_token=env.operator_token, auth_service=auth_service
        ),
        issuer=issuer,
        version=importlib.metadata.version("wm"),
        max_in_flight=WEB_DB_POOL_SIZE,
        legacy=legacy(config, issuer),
        schema=readiness,
    )
    port = config.env.port or config.web.port
    sock = bind_web(port)
    server = QuietExitServer(
        uvicorn.Config(
            app,
            host="0.0.0.0",
            port=port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )
    )
    stopping = threading.Event()
    failed: list[SchemaNotReady] = []

    def watch_schema() -> None:
        try:
            schema.wait(
                engine,
                config.database.schema_wait_s,
                process="web",
                stop=stopping,
                readiness=readiness,
            )
        except SchemaNotReady as exc:
            failed.append(exc)
            server.should_exit = True

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: setattr(server, "should_exit", True))
    if not readiness.ready:
        threading.Thread(target=watch_schema, name="schema-watch", daemon=True).start()
    # Started once a stop signal is handled: from here on a stop is a clean one.
    mode = "taskcluster" if auth_service else "standalone"
    log("process-started", process="web", port=port, issuer=issuer.client_id, mode=mode)
    try:
        server.run(sockets=[sock])
    finally:
        stopping.set()
    engine.dispose()
    if failed:
        raise failed[0]
    log("process-stopped", process="web", exit_code=0)
    return 0


class QuietExitServer(uvicorn.Server):
    """uvicorn re-raises SIGTERM after a graceful shutdown, which makes the exit code -15; a
    SIGTERM is this process's normal way to stop, so it exits 0 instead."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
