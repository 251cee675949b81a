"""How a failed signal read is named (the log line's and the gauge's reason), and a source's
cadence: pure."""

from __future__ import annotations

import pytest

from wm.errors import CloudError, ErrorCategory
from wm.model import SignalKind
from wm.providers.signal_sources import Cadence, SignalSource, SourceGarbage, failure_reason
from wm.scanning.signals_job import source_interval_s


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


class EndpointConnectionError(Exception):
    pass


class ResponseParserError(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (CloudError("p", ErrorCategory.THROTTLED, "Deferred", "busy"), "deferred"),
        (CloudError("p", ErrorCategory.PAUSED, "Paused", "paused"), "paused"),
        (CloudError("p", ErrorCategory.TRANSIENT, "Timeout", "no answer within 1s"), "timeout"),
        (CloudError("p", ErrorCategory.BAD_CONFIG, "UnauthorizedOperation", "no"), "forbidden"),
        (CloudError("p", ErrorCategory.BAD_CONFIG, "Forbidden", "403 POST ..."), "forbidden"),
        (CloudError("p", ErrorCategory.BAD_CONFIG, "AuthorizationFailed", "no"), "forbidden"),
        (CloudError("p", ErrorCategory.THROTTLED, "RequestLimitExceeded", "slow"), "throttled"),
        (
            _chained(
                CloudError("p", ErrorCategory.TRANSIENT, "EndpointConnectionError", "x"),
                EndpointConnectionError(),
            ),
            "down",
        ),
        (CloudError("p", ErrorCategory.TRANSIENT, "ResponseParserError", "xml"), "garbage"),
        (_chained(RuntimeError("x"), ResponseParserError()), "garbage"),
        (SourceGarbage("no Items"), "garbage"),
        (CloudError("p", ErrorCategory.TRANSIENT, "InternalError", "5xx"), "error"),
    ],
)
def test_a_failed_read_is_named_by_how_it_failed(error, reason):
    assert failure_reason(error) == reason


def test_a_configured_cadence_overrides_the_sources_own():
    source = SignalSource("S", (SignalKind.PRICE,), Cadence.PRICE, 600.0)
    assert source_interval_s(source, {Cadence.PRICE: None}) == 600.0
    assert source_interval_s(source, {Cadence.PRICE: 60.0}) == 60.0
    assert source_interval_s(source, {Cadence.CAPACITY: 60.0}) == 600.0
