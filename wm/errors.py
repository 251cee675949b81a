"""Typed errors. Each class's docstring is its message's first line."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class WmError(Exception):
    """wm failed."""


class ConfigError(WmError):
    """The configuration is not valid."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(f"{source}: " + "; ".join(self.problems))


class PortTaken(WmError):
    """A port a process must listen on is held by another process on this host."""


class ErrorCategory(StrEnum):
    """What a caller can do about a cloud error."""

    THROTTLED = "throttled"  # slow down and retry
    TRANSIENT = "transient"  # 5xx, timeout, connection reset: retry
    # The cloud has no spare capacity of this offering (type x zone x market) now: try another
    # zone, type or market, or this one later.
    CAPACITY = "capacity"
    # The account's limit (region x family x market, or every spot launch) is reached: launches
    # anywhere in that scope fail until instances go or the limit is raised.
    QUOTA = "quota"
    BAD_CONFIG = "bad-config"  # image, machine type, credentials: a human must fix it
    NOT_FOUND = "not-found"  # the resource does not exist (often: already gone)
    PAUSED = "paused"  # the gate refused the call because the provider is paused


RETRYABLE = frozenset({ErrorCategory.THROTTLED, ErrorCategory.TRANSIENT})
# Answers after which the request surely had no effect, unless an earlier attempt of the same
# call may have had one. A transient error (timeout, reset, 5xx) is never one of them: the
# request may have been carried out and only its answer lost.
DEFINITE_REFUSALS = frozenset(
    {
        ErrorCategory.CAPACITY,
        ErrorCategory.QUOTA,
        ErrorCategory.BAD_CONFIG,
        ErrorCategory.THROTTLED,
        ErrorCategory.NOT_FOUND,
        ErrorCategory.PAUSED,
    }
)


SPOT = "spot"
ON_DEMAND = "on-demand"


@dataclass(frozen=True)
class ErrorScope:
    """Which launches a capacity or quota refusal says will fail too. A field that is None
    covers every value: a quota with `family=None` holds for every type in its region, one with
    `market=SPOT` for every spot launch there. Each provider's errors.py `error_scope` reads
    it from the refusal and the launch config that met it (pure)."""

    category: ErrorCategory  # CAPACITY or QUOTA
    region: str | None  # region (EC2, GCE) or location (Azure); None: every region
    zone: str | None = None
    instance_type: str | None = None
    # The family or quota bucket the cloud counts the limit in (EC2 "Standard", GCE "N2",
    # Azure "standardDSv3Family"); None: every family.
    family: str | None = None
    market: str | None = None  # SPOT or ON_DEMAND; None: both
    # Zones the cloud's message says do have capacity of this type (EC2's ICE message).
    zones_with_capacity: tuple[str, ...] = ()


# The code of a call wm did not send because its process is stopping.
SHUTTING_DOWN = "ShuttingDown"


class CloudError(WmError):
    """A cloud API call failed."""

    def __init__(
        self,
        provider: str,
        category: ErrorCategory,
        code: str,
        message: str,
        *,
        operation: str = "",
        retry_after_s: float | None = None,
        maybe_applied: bool = False,
    ) -> None:
        self.provider = provider
        self.category = category
        self.code = code
        self.message = message
        self.operation = operation
        self.retry_after_s = retry_after_s
        # The cloud may have carried the request out: an attempt of this call reached it and
        # its answer was lost or was a server error. A later refusal (a throttle, a pause, a
        # stopping process) does not undo that, so the flag sticks across a call's attempts.
        self.maybe_applied = maybe_applied
        super().__init__(f"{provider} {operation or 'call'}: {category} {code}: {message}")

    @property
    def retryable(self) -> bool:
        return self.category in RETRYABLE

    @property
    def never_sent(self) -> bool:
        """No attempt of this call left wm: the process stopped before sending it (a stopping
        process sends nothing more), and no earlier attempt may have acted."""
        return self.code == SHUTTING_DOWN and not self.maybe_applied

    @property
    def nothing_applied(self) -> bool:
        """The cloud surely did nothing: it said no (capacity, quota, bad config, throttled), or wm
        never sent the request (paused, stopping), and no earlier attempt may have acted."""
        return self.category in DEFINITE_REFUSALS and not self.maybe_applied

    def not_found_as_config(self) -> CloudError:
        """A create answered "not found" names something its body refers to (an image, a
        network, a subnet, a zone), never the instance it creates: a definition to fix."""
        if self.category is not ErrorCategory.NOT_FOUND:
            return self
        return CloudError(
            self.provider,
            ErrorCategory.BAD_CONFIG,
            self.code,
            self.message,
            operation=self.operation,
            retry_after_s=self.retry_after_s,
            maybe_applied=self.maybe_applied,
        )


class UnknownCloudState(WmError):
    """A cloud reported an instance state that wm has no mapping for."""

    def __init__(self, provider: str, state: str) -> None:
        self.provider = provider
        self.state = state
        super().__init__(f"{provider}: unknown instance state {state!r}")


class UnclassedOperation(Exception):
    """A provider called a cloud operation its gate's call-class table does not list.

    A bug, not a cloud failure: a misspelt operation name or a new call nobody classed would
    otherwise draw from no bucket of the shared API budget. Deliberately not a WmError, so no
    handler of wm's own errors turns it into a pool error or a user message.
    """

    def __init__(self, provider: str, operation: str) -> None:
        self.provider = provider
        self.operation = operation
        super().__init__(
            f"{provider}: operation {operation!r} is not in its provider's CALL_CLASSES: "
            "add it with the call classes its cloud counts it against"
        )


class QueueUnavailable(WmError):
    """The queue source could not be read."""


class SchemaNotReady(WmError):
    """The database's schema is not the one this wm needs (`wm db upgrade` makes it so)."""
