"""Sentry: one event per failure, tagged for filtering, its repeats grouped and bounded.

One path: an ERROR log line (wm/ops/telemetry.py `log`) is the event, through sentry_sdk's logging
integration; a crash no log line told of comes through its excepthook and threading hooks.
Nothing else sends one: no explicit captures beside the log line (the SDK dropped those as
duplicates of it, tags and all), no web framework integration beside the guard's `api-error`.
Each event gets its tags and fingerprint from wm/ops/error_reports.py, and wm/ops/repeats.py drops
repeats of a fingerprint within SENTRY_REPEAT_WINDOW_S.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from wm.config.loader import DEFAULT_REPEAT_WINDOW_S
from wm.ops.error_reports import describe
from wm.ops.repeats import RepeatLimiter


@dataclass
class _Reporter:
    provider_kinds: Mapping[str, str]
    limiter: RepeatLimiter
    clock: Callable[[], float] = field(default=time.monotonic)

    def before_send(self, event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any] | None:
        record: logging.LogRecord | None = hint.get("log_record")
        exc_info = hint.get("exc_info") or (record.exc_info if record else None)
        exc = exc_info[1] if exc_info else None
        report = describe(
            # A library's own line is named by its logger; a crash no line told of, by nothing.
            getattr(record, "wm_event", None) or getattr(record, "name", None),
            getattr(record, "wm_fields", None) or {},
            event.get("tags") or {},
            exc,
            self.provider_kinds,
        )
        admission = self.limiter.admit(report.fingerprint, self.clock())
        if not admission.send:
            return None
        event["tags"] = report.tags
        event["fingerprint"] = list(report.fingerprint)
        if admission.suppressed:
            event.setdefault("extra", {})["repeats_suppressed"] = admission.suppressed
        return event


_active = False


def init_sentry(
    dsn: str | None,
    process: str,
    provider_kinds: Mapping[str, str] | None = None,
    repeat_window_s: float = DEFAULT_REPEAT_WINDOW_S,
) -> None:
    """Initialise Sentry when a DSN is configured; a no-op otherwise."""
    global _active
    if not dsn:
        return
    import sentry_sdk
    from sentry_sdk.integrations.logging import LoggingIntegration

    reporter = _Reporter(dict(provider_kinds or {}), RepeatLimiter(repeat_window_s))
    sentry_sdk.init(
        dsn=dsn,
        server_name=process,
        # An ERROR line is the event (sentry-sdk 3 sends none for log lines unless told); no
        # Sentry Logs stream beside it: every INFO line shipped, the proofs' fields in some.
        integrations=[
            LoggingIntegration(level=None, event_level=logging.ERROR, breadcrumb_level=logging.INFO)
        ],
        # No local variables in stack traces: wm's frames hold identity proofs, worker secrets
        # and cloud credentials under names Sentry's scrubber does not know (document,
        # signature...). No user, cookies, query strings or bodies: what 2.x's
        # send_default_pii=False kept out, which 3's defaults send.
        data_collection={
            "user_info": False,
            "stack_frame_variables": False,
            "cookies": {"mode": "off"},
            "url_query_params": {"mode": "off"},
            "http_bodies": [],
        },
        # The frameworks' integrations (Starlette, SQLAlchemy, boto3...) would send events of
        # their own beside wm's log lines: the same failure twice.
        auto_enabling_integrations=False,
        before_send=reporter.before_send,
    )
    sentry_sdk.set_tag("process", process)
    _active = True


@contextlib.contextmanager
def report_scope(**tags: str) -> Iterator[None]:
    """Tags for every event sent while in it (a pass: its job, provider, region)."""
    if not _active:
        yield
        return
    import sentry_sdk

    with sentry_sdk.isolation_scope() as scope:
        for key, value in tags.items():
            scope.set_tag(key, value)
        yield
