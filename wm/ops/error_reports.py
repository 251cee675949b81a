"""What an error report says: its tags, and the fingerprint that groups its repeats.

Pure: from a log line's event name and fields, the scope's tags and the exception, decide the
tags people filter on (process, provider and its kind, region, pool, job and its kind, the
error's category and code) and a fingerprint made of what stays the same when a failure
repeats (its kind, the provider, the operation, the exception type), never of a message that
holds request ids, times or counts. A cloud out of reach is one issue per provider and
operation; the database out of reach is one issue, whatever process or pass met it.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from wm.db.engine import DATABASE_DOWN
from wm.errors import CloudError, ErrorCategory

# Log fields copied into tags of the same name.
TAGGED_FIELDS = ("process", "provider", "region", "pool", "job", "route", "child")
# A cloud's failures that all mean "out of reach for now": one issue, whatever the code
# (a refused connection, a timeout and a 503 alternate in one outage), and the gate's pause
# that follows them is the same outage.
UNAVAILABLE = frozenset({ErrorCategory.TRANSIENT, ErrorCategory.PAUSED})
DATABASE_UNAVAILABLE = "database-unavailable"
# What tells one failure without an exception from another of the same event.
SUBJECT_TAGS = ("job_kind", "provider", "pool", "child", "route")
MAX_TAG_LENGTH = 200  # Sentry's limit on a tag's value


@dataclass(frozen=True)
class Report:
    tags: dict[str, str]  # tag -> value, only those known for this event
    fingerprint: tuple[str, ...]  # what groups its repeats into one issue


def describe(
    event: str | None,
    fields: Mapping[str, object],
    scope_tags: Mapping[str, str],
    exc: BaseException | None,
    provider_kinds: Mapping[str, str],
) -> Report:
    """The tags and fingerprint of one report. `event`/`fields`: the log line's (None for a
    crash no log line told of); `scope_tags`: those of the pass or request it happened in."""
    tags = dict(scope_tags)
    tags.update({k: str(fields[k]) for k in TAGGED_FIELDS if fields.get(k) not in (None, "")})
    if event:
        tags["log_event"] = event
    if "job" in tags:
        tags["job_kind"] = job_kind(tags["job"])
    cloud = cloud_cause(exc)
    if cloud is not None:
        tags.setdefault("provider", cloud.provider)
        tags["error_category"] = str(cloud.category)
        tags["error_code"] = cloud.code
        if cloud.operation:
            tags["operation"] = cloud.operation
    elif database_down(exc):
        tags["error_category"] = DATABASE_UNAVAILABLE
    if tags.get("provider") in provider_kinds:
        tags["provider_kind"] = provider_kinds[tags["provider"]]
    return Report(
        {k: v[:MAX_TAG_LENGTH] for k, v in tags.items()}, fingerprint(event, tags, exc, cloud)
    )


def fingerprint(
    event: str | None, tags: Mapping[str, str], exc: BaseException | None, cloud: CloudError | None
) -> tuple[str, ...]:
    if tags.get("error_category") == DATABASE_UNAVAILABLE:
        return (DATABASE_UNAVAILABLE,)
    if cloud is not None:
        if cloud.category in UNAVAILABLE:
            kind = ("cloud-unavailable",)
        else:  # a refusal: its code says what to fix (an image, a quota, credentials)
            kind = (f"cloud-{cloud.category}", cloud.code)
        return (*kind, cloud.provider, cloud.operation or "call")
    # A message names what happened, and which job, provider, pool... it happened to tells one
    # such failure from another; an exception (a bug) is told by its type and where it was
    # raised, one issue whichever provider or pool met it (those are tags).
    keys = SUBJECT_TAGS if exc is None else SUBJECT_TAGS[:1]
    subject = tuple(f"{k}={tags[k]}" for k in keys if tags.get(k))
    if exc is None:
        return (event or "message", *subject)
    return (event or "crash", *subject, type(exc).__name__, raised_at(exc))


def job_kind(job_id: str) -> str:
    """`scan:aws:us-east-1` -> `scan`: what a job does, whichever provider or region."""
    return job_id.split(":", 1)[0]


def raised_at(exc: BaseException) -> str:
    """Where wm's code raised it (its innermost frame of wm or procs), `module:function`: two
    bugs of one exception type are two issues, one bug met many times is one."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/wm/" in f.filename or "/procs/" in f.filename] or frames
    if not ours:
        return ""
    frame = ours[-1]
    module = frame.filename.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}:{frame.name}"


def cloud_cause(exc: BaseException | None) -> CloudError | None:
    """The cloud error that is this exception or one of its causes."""
    return next((e for e in _chain(exc) if isinstance(e, CloudError)), None)


def database_down(exc: BaseException | None) -> bool:
    """Whether this exception, or one of its causes, says the database is out of reach."""
    return any(isinstance(e, DATABASE_DOWN) for e in _chain(exc))


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
