"""The web process: the worker API on $PORT (uvicorn), /healthz and /metrics."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import uvicorn

from wm.api.app import create_app
from wm.config import Config
from wm.db.engine import make_engine
from wm.errors import WmError
from wm.telemetry import configure_logging, init_sentry, log

# Connections kept open; the engine may open POOL_MAX_OVERFLOW more (health checks). API
# requests in flight are bounded by the same number (more are shed with 429), so a request in
# flight never queues for a connection and a boot storm never grows the database's load.
WEB_DB_POOL_SIZE = 10
SHUTDOWN_GRACE_S = 5


def main(config: Config, *, metrics_port: int | None = None) -> int:
    # /metrics is served by the API itself: metrics_port is not used by this process.
    from wm.providers import build_verifier

    configure_logging()
    init_sentry(config.env.sentry_dsn, "web")
    if not config.env.database_url:
        raise WmError("DATABASE_URL is not set")
    engine = make_engine(
        config.env.database_url, application_name="wm-web", pool_size=WEB_DB_POOL_SIZE
    )
    verifiers = {
        p.id: build_verifier(p, config.deployment_id, config.root_url) for p in config.providers
    }
    app = create_app(
        engine,
        verifiers,
        deployment_id=config.deployment_id,
        audience=config.root_url,
        operator_token=config.env.operator_token,
        max_in_flight=WEB_DB_POOL_SIZE,
    )
    port = config.env.port or config.web.port
    log("process-started", process="web", port=port)
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
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: setattr(server, "should_exit", True))
    server.run()
    engine.dispose()
    log("process-stopped", process="web", exit_code=0)
    return 0


class QuietExitServer(uvicorn.Server):
    """uvicorn re-raises SIGTERM after a graceful shutdown, which makes the exit code -15; a
    SIGTERM is this process's normal way to stop, so it exits 0 instead."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
