"""The simulated worker: worker-runner and a generic worker on one VM, as the demo runs them.

What worker-runner does, in its order: read the boot data and the identity proof from the VM's
metadata service (wmsim/bootdata.py; a VM already told to go away does not start), call
`registerWorker` through the real `taskcluster.WorkerManager` client without credentials
(rootUrl from the boot data), then use the credentials it answered for everything else:
`reregisterWorker` before they expire (worker-runner's rule, `renew_in_s`; a refusal stops the
worker, its tasks given back), `shouldWorkerTerminate` while idle, `reportWorkerError` for a
task whose claim it lost, and `removeWorker` when it is done. On a hand-made machine (worker-
runner's static provider, wmsim/hand_made.py) the provider's config is the boot data, there is
no metadata service nor notice, and the worker neither leaves when idle nor calls
`removeWorker`: it stops when told to. What the worker does: claim builtin-queue tasks (in wm's
own Postgres, by the name the queue knows it by) and run them for their duration. A termination
notice in the metadata (pre-emption, eviction) makes it give its tasks back (resolved as
worker-shutdown: they go back to pending) and leave.

Like a real worker in a boot storm, it repeats what the API sheds (429), cannot do right now
(5xx) or does not answer, after RETRY_DELAY_S plus random jitter (so that the workers refused
together do not all come back together), until `give_up_s`. The taskcluster client's own
retries are off (maxRetries 0) so that this is the only retry loop, paced as the API asks:
the client's exceptions carry the status and body but not the Retry-After header, so the
delay is the one wm's API sends (2 s) rather than read from each answer.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import taskcluster
from taskcluster.exceptions import (
    TaskclusterAuthFailure,
    TaskclusterConnectionError,
    TaskclusterRestFailure,
)

from wm.model import Task
from wm.ops.telemetry import log
from wm.queues.builtin import BuiltinQueue
from wmsim.bootdata import BootData, CloudMetadata, MetadataError, read_retrying

CLIENT_MAX_RETRIES = 0  # the agent's own loop retries (see the module docstring)
# worker-runner's renewal (tools/worker-runner/registration/registration.go renewBeforeExpire):
# 30 minutes before the credentials expire, but not sooner than 5 minutes after they came,
# and at least 30 s before they expire.
RENEW_LONG_SETBACK_S = 30 * 60.0
RENEW_WAIT_AT_LEAST_S = 5 * 60.0
RENEW_MIN_SETBACK_S = 30.0
# Below this lifetime worker-runner renews at once, again and again (expires - 30 s <= 30 s):
# the compressed lifetimes of tests and demos renew at a quarter of it instead, keeping three
# quarters as the margin a busy machine's slow call needs (seconds, through the forwarding).
COMPRESSED_LIFETIME_S = 2 * RENEW_MIN_SETBACK_S
COMPRESSED_RENEW_AT = 0.25
LATE_RENEWAL_S = 1.0  # a renewal this late is logged: the thread was held (a busy machine)
POLL_S = 0.5
RETRY_STATUSES = frozenset({0, 429, 500, 502, 503, 504})  # 0: no answer
RETRY_DELAY_S = 2.0  # wm's API answers 429 and 503 with Retry-After: 2


@dataclass
class AgentSettings:
    # Remove itself when no task came for this long (None: never, as a hand-made machine).
    idle_timeout_s: float | None = 30.0
    should_terminate_every_s: float = 5.0
    notice_every_s: float = 5.0  # how often it reads the termination notice (EC2: 5 s)
    time_scale: float = 1.0  # task durations are multiplied by this (compressed demos)
    give_up_s: float = 600.0  # a call shed or failed for this long is given up
    poll_s: float = POLL_S  # between claims while it has room for more tasks


@dataclass(frozen=True)
class Answer:
    """What one API call came to: status (0: no answer) and the body."""

    status: int
    body: dict[str, Any]
    attempts: tuple[int, ...] = ()  # every try's status, this one last
    sent_at: float = 0.0  # monotonic: when the first try went out


@dataclass(frozen=True)
class Refusal:
    """One call the API refused for good (not a retried 429/5xx): enough to say why."""

    call: str  # registerWorker, reregisterWorker
    status: int
    code: str | None
    message: str
    # the status of every try of this call, the refusal last: (0, 403) is an answer lost on
    # the way and the repeat refused
    attempts: tuple[int, ...]
    # how long the credentials it called with had left when it called (None: it had none)
    credentials_left_s: float | None = None


@dataclass
class WorkerAgent:
    metadata: CloudMetadata  # the VM's metadata service
    queue: BuiltinQueue
    queue_worker_id: str  # the name the builtin queue knows it by (wm's intent key)
    capacity: int = 1  # tasks it runs at once (its launch config's capacity per worker)
    settings: AgentSettings = field(default_factory=AgentSettings)
    stop: threading.Event = field(default_factory=threading.Event)
    events: list[str] = field(default_factory=list)  # what happened, for tests and reports
    retries: int = 0  # calls repeated after a 429, a 5xx or no answer
    answers: Counter[int] = field(default_factory=Counter)  # HTTP status (0: none) -> times
    refusals: list[Refusal] = field(default_factory=list)
    boot: BootData | None = None
    booted_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    _client: Any = None  # taskcluster.WorkerManager with the worker's credentials
    _secret: str | None = None
    _renew_at: float = 0.0  # monotonic
    _expires_at: float | None = None  # monotonic: when the credentials it holds expire
    # Set by the renewal timer when reregisterWorker was refused; set when the worker is done,
    # which ends the timer.
    _renewal_refused: threading.Event = field(default_factory=threading.Event)
    _done: threading.Event = field(default_factory=threading.Event)
    _counting: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        """Register, work, and leave; returns when the worker has removed itself or is stopped."""
        if not self.register():
            return
        # worker-runner renews on a timer of its own (a goroutine), whatever the worker is
        # waiting for: a call the API sheds for a minute must not let the credentials lapse.
        renewals = threading.Thread(
            target=self._renew_on_time, daemon=True, name=f"renew-{self.queue_worker_id}"
        )
        renewals.start()
        try:
            self._work()
        finally:
            # The worker is done: its renewals end with it (worker-runner's WorkerFinished), so
            # none is still out when it removes itself.
            self._done.set()
            renewals.join()
        if self.stop.is_set():
            return
        if self.boot_data.dynamically_provisioned:
            self._remove()
        else:
            self.events.append("exited")  # worker-runner: "Host is not dynamically provisioned"

    def _work(self) -> None:
        idle_since = time.monotonic()
        next_check = next_notice = time.monotonic()
        running: list[tuple[float, Task]] = []  # (when it is done, task)
        while not self.stop.is_set():
            if self._renewal_refused.is_set():
                # worker-runner asks the worker to stop at once ("finish-tasks": false): its
                # tasks go back, as for a termination notice.
                self._shut_down(running, "renewal-refused")
                break
            now = time.monotonic()
            if now >= next_notice:
                next_notice = now + self.settings.notice_every_s
                if self.metadata.terminating():
                    self._shut_down(running, "termination-notice")
                    break
            for done_at, task in [r for r in running if r[0] <= now]:
                running.remove((done_at, task))
                self._finish(task)
            room = self.capacity - len(running)
            if room > 0:
                for task in self.queue.claim(
                    self.boot_data.worker_pool_id, self.queue_worker_id, room
                ):
                    running.append((now + task.duration_s * self.settings.time_scale, task))
            if running:
                idle_since = now
                self.stop.wait(min(self.settings.poll_s, min(r[0] for r in running) - now))
                continue
            if now >= next_check:
                next_check = now + self.settings.should_terminate_every_s
                if self._should_terminate():
                    break
            idle_timeout_s = self.settings.idle_timeout_s
            if idle_timeout_s is not None and now - idle_since > idle_timeout_s:
                self.events.append("idle")
                break
            self.stop.wait(self.settings.poll_s)

    @property
    def boot_data(self) -> BootData:
        assert self.boot is not None, "register() first"
        return self.boot

    # -- worker-runner's start --------------------------------------------------------------

    def register(self) -> bool:
        """Read the boot data and register (retrying what the API sheds); True once registered."""
        boot = self._configure()
        if boot is None:
            return False
        self.boot = boot
        if self.metadata.terminating():
            self.events.append("terminating-at-boot")  # worker-runner does not start then
            return False
        anonymous = _client(boot.root_url)
        reply = self._call(anonymous.registerWorker, registration_body(boot, self.booted_at))
        if reply.status != 200:
            self._refused("registerWorker", reply)
            self.events.append(f"register-refused:{reply.body.get('code')}")
            return False
        self._accept(reply.body)
        self.events.append("registered")
        return True

    def _configure(self) -> BootData | None:
        """The boot data, read again while the metadata service does not answer (or answers
        5xx: a VM's metadata service can lag its boot), up to give_up_s."""
        if self.stop.is_set():
            return None
        try:
            return read_retrying(
                self.metadata.configure,
                self.settings.give_up_s,
                wait=self.stop.wait,
                on_retry=lambda error: log(
                    "agent-metadata-unavailable", worker=self.queue_worker_id, error=str(error)
                ),
            )
        except MetadataError as error:
            if not self.stop.is_set():
                self.events.append(f"metadata-unavailable:{error.path}")
            return None

    def _accept(self, reply: dict[str, Any]) -> None:
        """Take the credentials and secret of a (re)registration; plan the next renewal."""
        boot = self.boot_data
        self._client = _client(boot.root_url, reply["credentials"])
        self._secret = reply["secret"]
        lifetime_s = (_parse(reply["expires"]) - datetime.now(UTC)).total_seconds()
        self._expires_at = time.monotonic() + lifetime_s
        self._renew_at = time.monotonic() + max(1.0, renew_in_s(lifetime_s))

    # -- while it works -----------------------------------------------------------------------

    def _renew_on_time(self) -> None:
        """reregisterWorker each time it is due, until the worker is done or stopped, or a
        renewal is refused (worker-runner then asks the worker to stop)."""
        while not (self._done.is_set() or self.stop.is_set()):
            wait_s = self._renew_at - time.monotonic()
            if wait_s > 0:
                self._done.wait(min(wait_s, self.settings.poll_s))
                continue
            if not self._renew():
                self._renewal_refused.set()
                return

    def _renew(self) -> bool:
        late_s = time.monotonic() - self._renew_at
        if late_s > LATE_RENEWAL_S:
            log("agent-renewing-late", worker=self.boot_data.worker_id, late_s=round(late_s, 1))
        boot = self.boot_data
        reply = self._call(
            self._client.reregisterWorker,
            {
                "workerPoolId": boot.worker_pool_id,
                "workerGroup": boot.worker_group,
                "workerId": boot.worker_id,
                "secret": self._secret,
            },
        )
        if reply.status != 200:
            self._refused("reregisterWorker", reply)
            self.events.append(f"reregister-refused:{reply.body.get('code')}")
            return False
        self._accept(reply.body)
        self.events.append("reregistered")
        return True

    def _refused(self, call: str, reply: Answer) -> None:
        refusal = Refusal(
            call,
            reply.status,
            reply.body.get("code"),
            str(reply.body.get("message", ""))[:500],
            reply.attempts,
            None if self._expires_at is None else round(self._expires_at - reply.sent_at, 1),
        )
        self.refusals.append(refusal)
        log(
            "agent-refused",
            worker=self.boot_data.worker_id,
            call=call,
            status=reply.status,
            code=refusal.code,
            message=refusal.message,
            attempts=list(reply.attempts),
            credentials_left_s=refusal.credentials_left_s,
        )

    def _finish(self, task: Task) -> None:
        if self.queue.complete(task.task_id, self.queue_worker_id):
            self.events.append("task-done")
            return
        self.report_error(
            "claim-lost",
            "Task claim lost",
            f"task {task.task_id} was no longer claimed by this worker when it finished",
            {"taskId": str(task.task_id)},
        )

    def report_error(self, kind: str, title: str, description: str, extra: dict[str, Any]) -> None:
        """reportWorkerError, as worker-runner forwards a worker's error-report message."""
        boot = self.boot_data
        reply = self._call(
            self._client.reportWorkerError,
            boot.worker_pool_id,
            {
                "workerGroup": boot.worker_group,
                "workerId": boot.worker_id,
                "kind": kind,
                "title": title,
                "description": description,
                "extra": extra,
            },
        )
        self.events.append(f"error-reported:{kind}" if reply.status == 200 else "report-failed")

    def _should_terminate(self) -> bool:
        boot = self.boot_data
        reply = self._call(
            self._client.shouldWorkerTerminate,
            boot.worker_pool_id,
            boot.worker_group,
            boot.worker_id,
        )
        if reply.status == 200 and reply.body.get("terminate"):
            self.events.append(f"told-to-terminate:{reply.body.get('reason')}")
            return True
        return False

    def _shut_down(self, running: list[tuple[float, Task]], why: str) -> None:
        """A termination notice, or credentials it could not renew: the tasks it runs are
        given back (worker-shutdown), at once."""
        self.events.append(why)
        if running:
            self.queue.release([self.queue_worker_id])
            running.clear()

    def _remove(self) -> None:
        boot = self.boot_data
        reply = self._call(
            self._client.removeWorker, boot.worker_pool_id, boot.worker_group, boot.worker_id
        )
        self.events.append("removed" if reply.status == 200 else f"remove-failed:{reply.status}")

    # -- calls ---------------------------------------------------------------------------------

    def _call(self, method: Callable[..., Any], *args: Any) -> Answer:
        """One API call through the client, repeated while the API sheds it, fails with a 5xx
        or does not answer, up to give_up_s."""
        sent_at = time.monotonic()
        give_up_at = sent_at + self.settings.give_up_s
        attempts: tuple[int, ...] = ()
        while True:
            answer = _answer(method, *args)
            attempts += (answer.status,)
            with self._counting:  # the renewal timer calls too
                self.answers[answer.status] += 1
            if answer.status not in RETRY_STATUSES or self.stop.is_set():
                return replace(answer, attempts=attempts, sent_at=sent_at)
            delay_s = RETRY_DELAY_S * (1.0 + random.random())
            if time.monotonic() + delay_s > give_up_at:
                return replace(answer, attempts=attempts, sent_at=sent_at)
            with self._counting:
                self.retries += 1
            self.stop.wait(delay_s)


def renew_in_s(lifetime_s: float) -> float:
    """How long after a (re)registration worker-runner renews credentials that last
    `lifetime_s` (a quarter in, for the compressed lifetimes below COMPRESSED_LIFETIME_S)."""
    if lifetime_s < COMPRESSED_LIFETIME_S:
        return lifetime_s * COMPRESSED_RENEW_AT
    renew = lifetime_s - RENEW_LONG_SETBACK_S
    if renew < RENEW_WAIT_AT_LEAST_S:
        renew = min(RENEW_WAIT_AT_LEAST_S, lifetime_s - RENEW_MIN_SETBACK_S)
    return renew


def registration_body(boot: BootData, booted_at: datetime) -> dict[str, Any]:
    """registerWorker's body as worker-runner's registration manager sends it, whatever the
    provider: the provider's identity and proof, and the machine's boot time."""
    return {
        "workerPoolId": boot.worker_pool_id,
        "providerId": boot.provider_id,
        "workerGroup": boot.worker_group,
        "workerId": boot.worker_id,
        "workerIdentityProof": dict(boot.proof),
        "systemBootTime": _stamp(booted_at),
    }


def _client(root_url: str, credentials: dict[str, Any] | None = None) -> Any:
    options: dict[str, Any] = {"rootUrl": root_url, "maxRetries": CLIENT_MAX_RETRIES}
    if credentials is not None:
        options["credentials"] = {
            key: credentials[key]
            for key in ("clientId", "accessToken", "certificate")
            if credentials.get(key)
        }
    return taskcluster.WorkerManager(options)


def _answer(method: Callable[..., Any], *args: Any) -> Answer:
    try:
        return Answer(200, method(*args) or {})
    except (TaskclusterRestFailure, TaskclusterAuthFailure) as error:
        body = error.body if isinstance(error.body, dict) else {}
        return Answer(int(getattr(error, "status_code", 0) or 0), body)
    except TaskclusterConnectionError:
        return Answer(0, {})


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(stamp: str) -> datetime:
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def run_in_thread(agent: WorkerAgent) -> threading.Thread:
    def life() -> None:
        try:
            agent.run()
        except Exception as error:  # a sim bug: the worker dies, visibly, as a process would
            log("agent-crashed", worker=agent.queue_worker_id, error=repr(error))
            agent.events.append(f"crashed:{type(error).__name__}")

    thread = threading.Thread(target=life, daemon=True, name=f"agent-{agent.queue_worker_id}")
    thread.start()
    return thread
