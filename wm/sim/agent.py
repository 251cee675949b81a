"""The simulated worker agent: what a generic worker on a VM does, over wm's HTTP API.

After its VM boots it fetches an identity proof from its simulated cloud (as a real worker asks
the metadata service), registers, then claims and runs builtin-queue tasks, re-registers
before its secret expires, polls should-terminate, and removes itself when told to or when
idle past `idle_timeout_s`. Every step goes through the real API, so the whole lifecycle is
exercised end to end.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wm.queues.builtin import BuiltinQueue
from wm.telemetry import log

HTTP_TIMEOUT_S = 10.0
REREGISTER_AT_FRACTION = 0.5  # of the secret's lifetime
POLL_S = 0.5


@dataclass(frozen=True)
class AgentIdentity:
    pool_id: str
    provider_id: str
    worker_group: str
    worker_id: str


@dataclass
class AgentSettings:
    idle_timeout_s: float = 30.0  # remove itself when no task came for this long
    should_terminate_every_s: float = 5.0
    time_scale: float = 1.0  # task durations are multiplied by this (compressed demos)


@dataclass
class WorkerAgent:
    api_url: str
    identity: AgentIdentity
    fetch_proof: Callable[[], dict[str, Any]]
    queue: BuiltinQueue
    settings: AgentSettings = field(default_factory=AgentSettings)
    stop: threading.Event = field(default_factory=threading.Event)
    events: list[str] = field(default_factory=list)  # what happened, for tests and reports
    _secret: str | None = None
    _expires_at: float = 0.0

    def run(self) -> None:
        """Register, work, and leave; returns when the worker has removed itself or is stopped."""
        if not self._register():
            return
        idle_since = time.monotonic()
        next_check = time.monotonic() + self.settings.should_terminate_every_s
        while not self.stop.is_set():
            self._reregister_if_due()
            tasks = self.queue.claim(self.identity.pool_id, self.identity.worker_id)
            if tasks:
                for task in tasks:
                    self.stop.wait(task.duration_s * self.settings.time_scale)
                    self.queue.complete(task.task_id, self.identity.worker_id)
                    self.events.append("task-done")
                idle_since = time.monotonic()
                continue
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + self.settings.should_terminate_every_s
                if self._should_terminate():
                    break
            if time.monotonic() - idle_since > self.settings.idle_timeout_s:
                self.events.append("idle")
                break
            self.stop.wait(POLL_S)
        if not self.stop.is_set():
            self._remove()

    def _register(self) -> bool:
        try:
            proof = self.fetch_proof()
        except OSError as error:  # the metadata service did not answer
            log("agent-proof-unavailable", worker=self.identity.worker_id, error=str(error))
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
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self._secret:
            request.add_header("Authorization", f"Bearer {self._secret}")
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            try:
                return error.code, json.loads(error.read() or b"{}")
            except json.JSONDecodeError:
                return error.code, {}
        except OSError:
            return 0, {}


def run_in_thread(agent: WorkerAgent) -> threading.Thread:
    thread = threading.Thread(
        target=agent.run, daemon=True, name=f"agent-{agent.identity.worker_id}"
    )
    thread.start()
    return thread
