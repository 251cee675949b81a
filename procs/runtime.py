"""What every wm process shares: logging, Sentry, the engine, the scheduler, signals, exit.

One APScheduler job per unit of work (a provider, or a provider's region), each on an
executor of its own so a stalled cloud never delays another cloud's job. Overruns are skipped
(`max_instances=1`), never queued. A job that raises is logged and sent to Sentry and keeps
its schedule; one failing many times in a row stops the process with a non-zero exit so the
platform restarts it. SIGTERM: no new passes start, the running ones get a few seconds to
reach a safe point, then the process exits. A process with children (procs/children.py) stops
them with itself, and stops itself when one of them dies; a child watches its parent.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import REGISTRY, CollectorRegistry
from sqlalchemy import Engine

from procs.children import Children
from procs.ports import serve_metrics
from wm.config.loader import Config
from wm.db import schema
from wm.db.engine import make_engine
from wm.errors import WmError
from wm.ops.sentry import init_sentry, report_scope
from wm.ops.signal_event import SignalSafeEvent
from wm.ops.telemetry import configure_logging, log

SHUTDOWN_GRACE_S = 8.0  # SIGTERM to exit, within the platform's 10 s
MAX_CONSECUTIVE_FAILURES = 20
FIRST_RUN_DELAY_S = 0.2
EXIT_JOB_FAILURES = 3
RERUN_DELAY_S = 0.05
CHILD_EXIT_MARGIN_S = 1.0  # a child's own grace ends as the parent's does; then it must exit


@dataclass
class JobHealth:
    consecutive_failures: int = 0
    runs: int = 0


@dataclass
class Runtime:
    name: str
    config: Config
    engine: Engine = field(init=False)
    # Set by the SIGTERM/SIGINT handler, which a plain Event can hang (wm/ops/signal_event.py).
    stop: threading.Event = field(default_factory=SignalSafeEvent)
    exit_code: int = 0
    parent_pid: int | None = None  # a child: stop when this process is no longer the parent
    children: Children | None = None
    _scheduler: BackgroundScheduler = field(init=False)
    _health: dict[str, JobHealth] = field(default_factory=dict)
    _running: set[str] = field(default_factory=set)
    _woken: set[str] = field(default_factory=set)  # woken while running: run again right after
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _running_jobs: bool = False  # run() has begun: a stop goes through the shutdown

    def __post_init__(self) -> None:
        configure_logging()
        env = self.config.env
        init_sentry(
            env.sentry_dsn, self.name, self.config.provider_kinds(), env.sentry_repeat_window_s
        )
        if not self.config.env.database_url:
            raise WmError("DATABASE_URL is not set")
        self.engine = make_engine(self.config.env.database_url, application_name=f"wm-{self.name}")
        # A stop signal is a clean stop from here on, a wait for the schema included.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        log("process-starting", process=self.name, pid=os.getpid())
        # Started beside `release`, the schema may not be there yet: wait for it (or a stop).
        if not schema.wait(
            self.engine, self.config.database.schema_wait_s, process=self.name, stop=self.stop
        ):
            log("process-stopped", process=self.name, exit_code=0, abandoned=[])
            raise SystemExit(0)  # stopped before it started: nothing of its own to stop
        self._scheduler = BackgroundScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30}
        )
        self._scheduler.add_listener(self._on_overrun, EVENT_JOB_MAX_INSTANCES)

    def add_job(
        self,
        job_id: str,
        fn: Callable[[], object],
        interval_s: float,
        *,
        spread: bool = False,
        **tags: str,
    ) -> None:
        """Run fn every interval on an executor of its own; tags go on its Sentry events.

        `spread` starts the job at a random point of its first interval, so that replicas
        whose jobs compete for the same claims win different ones and share the work.
        """
        first_run_s = FIRST_RUN_DELAY_S + (random.uniform(0, interval_s) if spread else 0.0)
        self._health[job_id] = JobHealth()
        self._scheduler.add_executor(ThreadPoolExecutor(1), alias=job_id)
        self._scheduler.add_job(
            self._guarded,
            "interval",
            args=(job_id, fn, tags),
            id=job_id,
            executor=job_id,
            seconds=interval_s,
            next_run_time=datetime.now().astimezone() + timedelta(seconds=first_run_s),
        )

    def wake(self, job_id: str, delay_s: float = 0.0) -> None:
        """Run a job now instead of at its next interval, or right after its current run."""
        if self.stop.is_set():
            return
        with self._lock:
            if job_id in self._running:
                # The running pass may have read the queue before this news: run once more.
                self._woken.add(job_id)
                return
        try:
            when = datetime.now().astimezone() + timedelta(seconds=delay_s)
            self._scheduler.modify_job(job_id, next_run_time=when)
        except Exception:  # the job is gone: shutting down
            return

    def fail(self, exit_code: int) -> None:
        """Stop the process with this exit code (a part of it is lost: a child died)."""
        self.exit_code = self.exit_code or exit_code
        self.stop.set()

    def run(self, metrics_port: int | None = None, registry: CollectorRegistry = REGISTRY) -> int:
        """Run until SIGTERM/SIGINT, a job that keeps failing or a lost child or parent; return
        the exit code. Metrics are served from `registry` (a parent's: its children's)."""
        self._running_jobs = True
        if metrics_port:
            serve_metrics(metrics_port, self.name, registry)
        # What start-up made (the SDKs' modules and models, the providers) lives as long as the
        # process: kept out of the collector's full collections, which otherwise walked all of
        # it, a 0.17 s pause of every thread in a provisioner every half minute or so.
        gc.freeze()
        log("process-started", process=self.name, jobs=sorted(self._health), pid=os.getpid())
        self._scheduler.start()
        while not self.stop.wait(0.5):
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                log("parent-gone", logging.WARNING, process=self.name, parent=self.parent_pid)
                self.stop.set()
        self._scheduler.shutdown(wait=False)
        if self.children is not None:
            self.children.terminate()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        while self._running and time.monotonic() < deadline:
            time.sleep(0.05)
        abandoned = sorted(self._running)
        if self.children is not None:
            code = self.children.wait(deadline + CHILD_EXIT_MARGIN_S)
            self.exit_code = self.exit_code or code
        log("process-stopped", process=self.name, exit_code=self.exit_code, abandoned=abandoned)
        self.engine.dispose()
        if abandoned:
            # Passes that did not reach a safe point in time: their claims die with the
            # connections, and intents they left are recovered by the next pass.
            sys.stdout.flush()
            os._exit(self.exit_code)
        return self.exit_code

    def _on_signal(self, signum: int, _frame: object) -> None:
        log("process-stopping", process=self.name, signal=signal.Signals(signum).name)
        self.stop.set()
        if not self._running_jobs and self.children is None:
            # Stopped while it starts (importing a cloud's SDK takes a busy machine seconds):
            # no pass has run, nothing of its own is under way, and a platform's grace may
            # end before the start would. A transaction a start-up step has open is rolled
            # back with its connection.
            log("process-stopped", process=self.name, exit_code=0, abandoned=[])
            sys.stdout.flush()
            os._exit(0)

    def _on_overrun(self, event: JobExecutionEvent) -> None:
        log("pass-skipped-overrun", logging.WARNING, process=self.name, job=event.job_id)

    def _guarded(self, job_id: str, fn: Callable[[], object], tags: dict[str, str]) -> None:
        if self.stop.is_set():
            return
        with self._lock:
            self._running.add(job_id)
        health = self._health[job_id]
        try:
            with report_scope(job=job_id, **tags):
                fn()
            health.consecutive_failures = 0
        except Exception as exc:
            if self.stop.is_set():
                # Cut short by the shutdown (a call refused as the process stops): expected,
                # and what the pass left is safe for the next one.
                log(
                    "pass-abandoned",
                    logging.WARNING,
                    process=self.name,
                    job=job_id,
                    error=f"{type(exc).__name__}: {exc}",
                    **tags,
                )
                return
            health.consecutive_failures += 1
            log(
                "pass-failed",
                logging.ERROR,
                exc_info=True,
                process=self.name,
                job=job_id,
                consecutive_failures=health.consecutive_failures,
                **tags,
            )
            if health.consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
                log("process-giving-up", logging.ERROR, process=self.name, job=job_id, **tags)
                self.exit_code = EXIT_JOB_FAILURES
                self.stop.set()
        finally:
            health.runs += 1
            with self._lock:
                self._running.discard(job_id)
                again = job_id in self._woken
                self._woken.discard(job_id)
            if again:
                # After this run is over in the scheduler's books, or it would be skipped.
                self.wake(job_id, delay_s=RERUN_DELAY_S)
