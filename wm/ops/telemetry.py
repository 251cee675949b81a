"""Logs as JSON lines on stdout, Prometheus metrics.

Every log line goes through `log(event, **fields)`: one `event` key naming what happened,
plus flat fields. Nothing else in wm configures logging handlers. An ERROR line is also the
Sentry event of its failure, tagged from its fields (wm/ops/sentry.py).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from typing import Any, Final

from prometheus_client import Counter, Gauge, Histogram

LOGGER = logging.getLogger("wm")
REDACTED_FIELDS = frozenset({"secret", "token", "proof", "password", "authorization"})

CLOUD_API_CALLS = Counter(
    "wm_cloud_api_calls_total",
    "SDK calls made through the cloud API gate, by outcome.",
    ["provider", "operation", "outcome"],
)
CLOUD_API_SECONDS = Histogram(
    "wm_cloud_api_call_seconds",
    "Duration of one SDK call attempt.",
    ["provider", "operation"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
# Gauges say how to merge the values of a provisioner's child processes (procs/children.py):
# each label set is written by one process, so the latest value of a live one is the value.
CHILDREN_MERGE: Final = "livemostrecent"
CLOUD_API_PAUSED = Gauge(
    "wm_cloud_api_paused",
    "1 while the provider's calls are paused.",
    ["provider"],
    multiprocess_mode=CHILDREN_MERGE,
)
CLAIMS_BUSY = Counter(
    "wm_claims_busy_total", "Claims skipped because another replica holds them.", ["kind"]
)


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "wm_fields", None) or {"message": record.getMessage()}
        line = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "event": getattr(record, "wm_event", record.name),
            **fields,
        }
        if record.exc_info and getattr(record, "wm_trace_in_log", True):
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Libraries log one line per HTTP request at INFO; keep only their warnings.
    for noisy in ("azure", "botocore", "urllib3", "werkzeug", "apscheduler.executors"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def log(
    event: str,
    level: int = logging.INFO,
    exc_info: bool | BaseException = False,
    *,
    trace_in_log: bool = True,
    **fields: Any,
) -> None:
    """`exc_info`: the exception (True: the one being handled), with its trace on the line
    unless `trace_in_log` is False (its message may quote a request's values): Sentry's event
    has it either way."""
    safe = {k: ("<redacted>" if k.lower() in REDACTED_FIELDS else v) for k, v in fields.items()}
    extra = {"wm_event": event, "wm_fields": safe, "wm_trace_in_log": trace_in_log}
    LOGGER.log(level, event, exc_info=exc_info, extra=extra)


def observe_stages(pool_id: str, provider_id: str, seconds: Mapping[str, float]) -> None:
    """Observe stage latencies of one worker, as wm/workers/stages.py's `durations` computed them
    (`wm status` summarises the same computation, so the two agree)."""
    for stage, value in seconds.items():
        STAGE_SECONDS.labels(pool_id, provider_id, stage).observe(value)


PROVISION_SECONDS = Histogram(
    "wm_provision_pass_seconds",
    "Duration of one provisioning pass of one provider.",
    ["provider"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
PROVISION_GAUGES = Gauge(
    "wm_pool_capacity",
    "Per pool at its last provisioning pass: pending, capacity to add, capacity by state.",
    ["pool", "measure"],
    multiprocess_mode=CHILDREN_MERGE,
)
# The launch choice by cost (pools in "shadow" or "cost" mode, wm/provisioning/cost_planning.py).
LAUNCH_CHOICE_WEIGHT = Gauge(
    "wm_launch_choice_weight",
    "Per pool and launch config at its last launching pass: the weight the cost choice gives "
    "it (Taskcluster's weight x availability x price factor; 0 while benched).",
    ["pool", "launch_config"],
    multiprocess_mode=CHILDREN_MERGE,
)
POOL_COST_PER_HOUR = Gauge(
    "wm_pool_cost_per_hour",
    "Per pool: what its running workers cost per hour at the prices wm holds.",
    ["pool"],
    multiprocess_mode=CHILDREN_MERGE,
)
# The launch choice's signal reads (wm/scanning/signals_job.py): a source that fails is neutral,
# and shows here and in a `signal-fetch-failed` log line.
SIGNAL_FETCH_FAILURES = Counter(
    "wm_signal_fetch_failures_total",
    "Signal reads that failed, by provider, source and reason (down, forbidden, garbage, "
    "timeout, throttled, deferred, paused, error).",
    ["provider", "source", "reason"],
)
SIGNAL_LAST_SUCCESS = Gauge(
    "wm_signal_last_success_timestamp_seconds",
    "When each signal source of a provider was last read successfully (epoch seconds).",
    ["provider", "source"],
    multiprocess_mode=CHILDREN_MERGE,
)
SCAN_SECONDS = Histogram(
    "wm_scan_seconds",
    "Duration of one scan of one provider region.",
    ["provider", "region"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)

STAGE_SECONDS = Histogram(
    "wm_worker_stage_seconds",
    "How long workers took for each stage of their life (wm/workers/stages.py): launch and"
    " removal.",
    ["pool", "provider", "stage"],
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200),
)
WORKERS_PREEMPTED = Counter(
    "wm_workers_preempted_total",
    "Workers whose VM the cloud took back (spot interruption, pre-emption, eviction).",
    ["pool", "provider"],
)
# Counted by each cloud's verifier just before its first expensive step (a key look-up or a
# signature check), so that "junk never reaches the crypto" can be read off /metrics.
IDENTITY_SIGNATURE_CHECKS = Counter(
    "wm_identity_signature_checks_total",
    "Identity proofs that passed the cheap checks and had their signature checked.",
    ["provider"],
)
API_BUDGET_WAIT_SECONDS = Histogram(
    "wm_api_budget_wait_seconds",
    "How long calls waited for their account's shared API budget before leaving.",
    ["provider"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
