"""The launch choice's signal sources: what each cloud's collector (wm/providers/<kind>/
signals.py) declares and what its callers read, so that no caller branches on a kind.

A collector holds its cloud's `sources`, each one API read on a cadence of its own (prices,
capacity now, pre-emption priors), and `collect(source, offerings)` reads one source for
some offerings through the provider's gate at its lowest priority (background calls) and
returns what it found as OfferingSignals; a source that fails raises, and
`failure_reason` names how (down, forbidden, garbage, timeout ...), for the log line and
the gauge. What to do with a failure (keep the last good value, try again later) is the
caller's (wm/scanning/signals_job.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from wm.errors import CloudError, ErrorCategory
from wm.model import Offering, OfferingSignal, SignalKind
from wm.providers.gate import DEFERRED

DAY_S = 86_400.0


class Cadence(StrEnum):
    """Which of the provider's `signals` intervals a source follows."""

    PRICE = "price"
    CAPACITY = "capacity"
    PREEMPTION = "preemption"


@dataclass(frozen=True)
class SignalSource:
    """One API a collector reads."""

    name: str  # the API, as logs, gauges and OfferingSignal.source name it
    kinds: tuple[SignalKind, ...]  # what it yields
    cadence: Cadence
    default_interval_s: float  # its refresh cadence unless the config says otherwise
    demand_only: bool = False  # read only for offerings of pools with pending tasks

    def signal(
        self,
        provider_id: str,
        offering: Offering,
        value: float,
        now: datetime,
        kind: SignalKind | None = None,
    ) -> OfferingSignal:
        """One value this source gave (of its first kind unless `kind` says which)."""
        return OfferingSignal(provider_id, offering, kind or self.kinds[0], value, self.name, now)


class SignalCollector(Protocol):
    """One provider's signal reads (wm/providers/<kind>/signals.py: `make_signals`)."""

    provider_id: str
    sources: tuple[SignalSource, ...]

    def collect(self, source: str, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        """Read one source for these offerings; raise when the source fails (nothing is
        returned half read). Offerings the source says nothing of get no signal."""
        ...

    def close(self) -> None:
        """Close the clients it built itself (those it shares close with the provider)."""
        ...


def collect_signals(
    collector: SignalCollector, offerings: Sequence[Offering]
) -> list[OfferingSignal]:
    """Every source of a collector read once for these offerings; a source that fails adds
    nothing (the caller that wants to know reads them one by one)."""
    found: list[OfferingSignal] = []
    for source in collector.sources:
        try:
            found += collector.collect(source.name, offerings)
        except Exception:  # neutral: a failed source is as if it said nothing
            continue
    return found


class SourceGarbage(ValueError):
    """A source answered something its collector cannot read."""


FORBIDDEN_CODES = frozenset(
    {
        "UnauthorizedOperation",  # EC2
        "AuthFailure",
        "AccessDenied",
        "AuthorizationFailed",  # ARM
        "Forbidden",  # google.api_core
        "PermissionDenied",
        "forbidden",
    }
)
_GARBAGE_WORDS = ("Parse", "Decode", "JSON", "Deserializ", "Garbage", "ValueError", "KeyError")
_DOWN_WORDS = ("Connection", "ServiceRequest", "Connect", "Refused", "NewConnection")


def _names(exc: BaseException) -> str:
    """The exception's type names along its cause chain, and a CloudError's code."""
    names = []
    seen: BaseException | None = exc
    while seen is not None and len(names) < 8:
        names.append(type(seen).__name__)
        if isinstance(seen, CloudError):
            names.append(seen.code)
        seen = seen.__cause__ or seen.__context__
    return " ".join(names)


def failure_reason(exc: BaseException) -> str:
    """How a source failed, in one word for a log line and a gauge's label: deferred (the API
    budget had no spare turn), paused (the provider's gate is paused), timeout, down (no
    connection), forbidden (no permission), throttled, garbage (an answer that cannot be read)
    or error (anything else: the cloud's own error)."""
    if isinstance(exc, CloudError):
        if exc.code == DEFERRED:
            return "deferred"
        if exc.category is ErrorCategory.PAUSED:
            return "paused"
        if exc.code == "Timeout":
            return "timeout"
        if exc.code in FORBIDDEN_CODES or "403" in exc.message[:40]:
            return "forbidden"
        if exc.category is ErrorCategory.THROTTLED:
            return "throttled"
    names = _names(exc)
    if any(word in names for word in _GARBAGE_WORDS):
        return "garbage"
    if any(word in names for word in _DOWN_WORDS):
        return "down"
    if "Timeout" in names:
        return "timeout"
    if any(code in names.split() for code in FORBIDDEN_CODES):
        return "forbidden"
    return "error"
