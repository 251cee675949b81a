"""What reaches the simulated clouds, seen from in front of them: the create calls a benchmark's
side made (CreateRecorder, a WSGI middleware per cloud), the latency from a task's submission to
the create call covering it, and the CPU time the simulation itself took (CpuMeter)."""

from __future__ import annotations

import io
import json
import math
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from wm.providers.base import TAG_POOL

WsgiApp = Callable[..., Any]


CREATE_OPERATIONS = frozenset(
    {"RunInstances", "instances.insert", "instances.bulkInsert", "VirtualMachines_CreateOrUpdate"}
)


@dataclass(frozen=True)
class CreateCall:
    """One create request as it reached a simulated cloud."""

    at: float  # time.monotonic() on arrival, before the sim's latency and answer
    pool_id: str | None  # from the request's pool tag
    vms: int  # instances it asks for (EC2 MaxCount; one elsewhere)
    key: str  # what makes a repeat of it the same request (client token, VM name)
    ok: bool  # answered 2xx
    answered: float  # time.monotonic() when the sim had its answer


class CreateRecorder:
    """A WSGI middleware recording the create calls of one simulated cloud."""

    def __init__(self, cloud: str, app: Callable[..., Any]) -> None:
        self.cloud = cloud
        self.calls: list[CreateCall] = []
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        arrived = time.monotonic()
        parsed = parse_create(self.cloud, environ)
        if parsed is None:
            return self._app(environ, start_response)
        statuses: list[str] = []

        def capture(status: str, headers: list, exc_info: Any = None) -> Any:
            statuses.append(status)
            return start_response(status, headers, exc_info)

        answer = self._app(environ, capture)
        pool_id, vms, key = parsed
        ok = bool(statuses) and statuses[-1].startswith("2")
        with self._lock:
            self.calls.append(CreateCall(arrived, pool_id, vms, key, ok, time.monotonic()))
        return answer


def read_body(environ: dict[str, Any]) -> bytes:
    """Read the request body and put it back for the sim."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    data = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(data)
    return data


def parse_create(cloud: str, environ: dict[str, Any]) -> tuple[str | None, int, str] | None:
    """(pool id, VMs, key) when the request is a create call, else None."""
    method, path = environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")
    if cloud == "aws" and method == "POST" and not path.startswith(("/_sim", "/moto-api")):
        form = dict(parse_qsl(read_body(environ).decode(errors="replace")))
        if form.get("Action") != "RunInstances":
            return None
        pool = next(
            (
                form.get(key[: -len("Key")] + "Value")
                for key, value in form.items()
                if value == TAG_POOL and re.fullmatch(r"TagSpecification\.\d+\.Tag\.\d+\.Key", key)
            ),
            None,
        )
        return pool, int(form.get("MaxCount", "1")), form.get("ClientToken", "")
    if cloud == "gcp" and method == "POST" and re.fullmatch(r".*/zones/[^/]+/instances", path):
        body = json.loads(read_body(environ) or b"{}")
        items = {i.get("key"): i.get("value") for i in body.get("metadata", {}).get("items", [])}
        pool = items.get(TAG_POOL) or body.get("labels", {}).get(TAG_POOL)
        return pool, 1, str(body.get("name", ""))
    vm_path = re.search(r"/providers/microsoft\.compute/virtualmachines/([^/]+)$", path, re.I)
    if cloud == "azure" and method == "PUT" and vm_path:
        body = json.loads(read_body(environ) or b"{}")
        return body.get("tags", {}).get(TAG_POOL), 1, vm_path.group(1).lower()
    return None


class CpuMeter:
    """A WSGI middleware summing the CPU time a simulated cloud's threads spend answering (its
    simulated latency is slept, so it is not counted): how much of a benchmark's wall time the
    simulation itself took."""

    def __init__(self, app: WsgiApp) -> None:
        self.cpu_s = 0.0
        self.requests = 0
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started = time.thread_time()
        try:
            return self._app(environ, start_response)
        finally:
            spent = time.thread_time() - started
            with self._lock:
                self.cpu_s += spent
                self.requests += 1


def task_latencies(
    calls: list[CreateCall], submitted: Mapping[str, float], demand: Mapping[str, int]
) -> list[float]:
    """Seconds from submission to the create call covering each task; inf where none did."""
    by_pool: dict[str, list[CreateCall]] = defaultdict(list)
    seen: set[str] = set()
    for call in sorted(calls, key=lambda c: c.at):
        if call.ok and call.pool_id in demand and call.key not in seen:
            seen.add(call.key)
            by_pool[call.pool_id].append(call)
    latencies: list[float] = []
    for pool_id, wanted in demand.items():
        covered = 0
        for call in by_pool[pool_id]:
            take = min(call.vms, wanted - covered)
            latencies += [call.at - submitted[pool_id]] * take
            covered += take
            if covered == wanted:
                break
        latencies += [math.inf] * (wanted - covered)
    return latencies
