"""The simulated worker agent: what a generic worker on a VM does, over wm's HTTP API.

After its VM boots it fetches an identity proof from its simulated cloud (as a real worker asks
the metadata service), registers, then claims and runs builtin-queue tasks, re-registers
before its secret expires, polls should-terminate, and removes itself when told to or when
idle past `idle_timeout_s`. Every step goes through the real API, so the whole lifecycle is
exercised end to end.

Like a real agent in a boot storm, it retries what the API sheds (429) or cannot do right now
(503, or no answer at all): after the Retry-After delay the API asked for, plus random jitter
so that the workers refused together do not all come back together, until `give_up_s`.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wm.model import Task
from wm.queues.builtin import BuiltinQueue
from wm.telemetry import log

HTTP_TIMEOUT_S = 10.0
REREGISTER_AT_FRACTION = 0.5  # of the secret's lifetime
POLL_S = 0.5
RETRY_STATUSES = frozenset({0, 429, 503})  # 0: no answer (refused, reset, timed out)
DEFAULT_RETRY_AFTER_S = 1.0  # when the answer names no delay
MAX_RETRY_AFTER_S = 60.0  # a delay asked for is honoured up to this


@dataclass(frozen=True)
class AgentIdentity:
    pool_id: str
    provider_id: str
    worker_group: str
    worker_id: str
    capacity: int = 1  # tasks it runs at once (its launch config's capacity per worker)


@dataclass
class AgentSettings:
    idle_timeout_s: float = 30.0  # remove itself when no task came for this long
    should_terminate_every_s: float = 5.0
    time_scale: float = 1.0  # task durations are multiplied by this (compressed demos)
    give_up_s: float = 600.0  # a call shed or failed for this long is given up
    poll_s: float = POLL_S  # between claims while it has room for more tasks


@dataclass
class WorkerAgent:
    api_url: str
    identity: AgentIdentity
    fetch_proof: Callable[[], dict[str, Any]]
    queue: BuiltinQueue
    settings: AgentSettings = field(default_factory=AgentSettings)
    stop: threading.Event = field(default_factory=threading.Event)
    events: list[str] = field(default_factory=list)  # what happened, for tests and reports
    retries: int = 0  # calls repeated after a 429, a 503 or no answer
    answers: Counter[int] = field(default_factory=Counter)  # HTTP status (0: none) -> times
    _secret: str | None = None
    _expires_at: float = 0.0

    def run(self) -> None:
        """Register, work, and leave; returns when the worker has removed itself or is stopped."""
        if not self.register():
            return
        idle_since = time.monotonic()
        next_check = time.monotonic() + self.settings.should_terminate_every_s
        running: list[tuple[float, Task]] = []  # (when it is done, task)
        while not self.stop.is_set():
            self._reregister_if_due()
            now = time.monotonic()
            for done_at, task in [r for r in running if r[0] <= now]:
                running.remove((done_at, task))
                self.queue.complete(task.task_id, self.identity.worker_id)
                self.events.append("task-done")
            room = self.identity.capacity - len(running)
            if room > 0:
                for task in self.queue.claim(self.identity.pool_id, self.identity.worker_id, room):
                    running.append((now + task.duration_s * self.settings.time_scale, task))
            if running:
                idle_since = now
                self.stop.wait(min(self.settings.poll_s, min(r[0] for r in running) - now))
                continue
            if now >= next_check:
                next_check = now + self.settings.should_terminate_every_s
                if self._should_terminate():
                    break
            if now - idle_since > self.settings.idle_timeout_s:
                self.events.append("idle")
                break
            self.stop.wait(self.settings.poll_s)
        if not self.stop.is_set():
            self._remove()

    def register(self) -> bool:
        """Fetch the proof and register (retrying what the API sheds); True once registered."""
        proof = self._fetch_proof()
        if proof is None:
            self.events.append("proof-unavailable")
            return False
        body = {
            "pool_id": self.identity.pool_id,
            "provider_id": self.identity.provider_id,
            "worker_group": self.identity.worker_group,
            "worker_id": self.identity.worker_id,
            "identity_proof": proof,
        }
        status, reply = self._call("POST", "/api/v1/workers/register", body)
        if status != 200:
            log(
                "agent-register-refused",
                worker=self.identity.worker_id,
                status=status,
                code=reply.get("code"),
            )
            self.events.append(f"register-refused:{reply.get('code')}")
            return False
        self._accept_secret(reply)
        self.events.append("registered")
        return True

    def _fetch_proof(self) -> dict[str, Any] | None:
        """The identity proof from the metadata service, retried while it does not answer (a
        VM's metadata service can lag its boot), up to give_up_s."""
        give_up_at = time.monotonic() + self.settings.give_up_s
        while not self.stop.is_set():
            try:
                return self.fetch_proof()
            except OSError as error:
                log("agent-proof-unavailable", worker=self.identity.worker_id, error=str(error))
                delay_s = DEFAULT_RETRY_AFTER_S * (1.0 + random.random())
                if time.monotonic() + delay_s > give_up_at:
                    return None
                self.stop.wait(delay_s)
        return None

    def _reregister_if_due(self) -> None:
        if time.monotonic() < self._expires_at:
            return
        body = {
            "pool_id": self.identity.pool_id,
            "worker_group": self.identity.worker_group,
            "worker_id": self.identity.worker_id,
            "secret": self._secret,
        }
        status, reply = self._call("POST", "/api/v1/workers/reregister", body)
        if status == 200:
            self._accept_secret(reply)
            self.events.append("reregistered")

    def _accept_secret(self, reply: dict[str, Any]) -> None:
        self._secret = reply["secret"]
        lifetime_s = (
            datetime.fromisoformat(reply["expires"]) - datetime.now().astimezone()
        ).total_seconds()
        self._expires_at = time.monotonic() + max(1.0, lifetime_s * REREGISTER_AT_FRACTION)

    def _should_terminate(self) -> bool:
        status, reply = self._call("GET", self._worker_path() + "/should-terminate")
        return status == 200 and bool(reply.get("should_terminate"))

    def _remove(self) -> None:
        status, _ = self._call("DELETE", self._worker_path())
        self.events.append("removed" if status == 202 else f"remove-failed:{status}")

    def _worker_path(self) -> str:
        i = self.identity
        return f"/api/v1/workers/{i.pool_id}/{i.worker_group}/{i.worker_id}"

    def _call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        """One API call, repeated while the API sheds it or does not answer, up to give_up_s."""
        give_up_at = time.monotonic() + self.settings.give_up_s
        while True:
            status, reply, retry_after_s = self._call_once(method, path, body)
            self.answers[status] += 1
            if status not in RETRY_STATUSES or self.stop.is_set():
                return status, reply
            delay_s = min(retry_after_s or DEFAULT_RETRY_AFTER_S, MAX_RETRY_AFTER_S)
            delay_s *= 1.0 + random.random()  # jitter: spread the workers refused together
            if time.monotonic() + delay_s > give_up_at:
                return status, reply
            self.retries += 1
            self.stop.wait(delay_s)

    def _call_once(
        self, method: str, path: str, body: dict | None
    ) -> tuple[int, dict, float | None]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self._secret:
            request.add_header("Authorization", f"Bearer {self._secret}")
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                return response.status, json.loads(response.read() or b"{}"), None
        except urllib.error.HTTPError as error:
            retry_after_s = _seconds(error.headers.get("Retry-After"))
            try:
                return error.code, json.loads(error.read() or b"{}"), retry_after_s
            except json.JSONDecodeError:
                return error.code, {}, retry_after_s
        except OSError:
            return 0, {}, None


def _seconds(header: str | None) -> float | None:
    """Retry-After as delay-seconds (what wm sends); anything else: no delay named."""
    if header is None or not header.strip().isdigit():
        return None
    return float(header.strip())


def run_in_thread(agent: WorkerAgent) -> threading.Thread:
    thread = threading.Thread(
        target=agent.run, daemon=True, name=f"agent-{agent.identity.worker_id}"
    )
    thread.start()
    return thread
