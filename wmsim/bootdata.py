"""How worker-runner learns who it is on each cloud: its boot data and identity proof, read
from the VM's metadata service over HTTP, at the paths and with the headers worker-runner uses
(tools/worker-runner/provider/{aws,google,azure}). What is common to the three clouds is here;
each cloud's reader is in its subpackage (wmsim/<cloud>/bootdata.py).

As in worker-runner, a metadata read that fails aborts the start; the caller decides what is
worth retrying (`MetadataError.transient`: no answer or a 5xx, what httpbackoff retries).
"""

from __future__ import annotations

import json
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

HTTP_TIMEOUT_S = 2.0  # worker-runner's metadata client timeout (AWS)
RETRY_DELAY_S = 2.0  # before a read again, plus as much jitter at most

T = TypeVar("T")


@dataclass(frozen=True)
class BootData:
    """What the worker knows once its provider is configured (worker-runner's run state)."""

    root_url: str
    provider_id: str
    worker_pool_id: str
    worker_group: str
    worker_id: str
    proof: Mapping[str, str] = field(repr=False)  # workerIdentityProof
    provider_metadata: Mapping[str, str] = field(default_factory=dict)
    # worker-runner's exit manager: a dynamically provisioned worker (every cloud provider)
    # calls removeWorker when its worker exits; a static (hand-made) one just exits.
    dynamically_provisioned: bool = True


class MetadataError(Exception):
    """A metadata read failed: the worker cannot start (yet)."""

    def __init__(self, path: str, status: int, message: str = "") -> None:
        super().__init__(f"{path}: {status or 'no answer'} {message}".strip())
        self.path = path
        self.status = status  # 0: no answer

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status >= 500


def read_retrying(
    read: Callable[[], T],
    give_up_s: float,
    wait: Callable[[float], bool] = lambda s: time.sleep(s) or False,
    on_retry: Callable[[MetadataError], None] = lambda error: None,
) -> T:
    """`read()`, again after a transient MetadataError (no answer, a 5xx: a VM's metadata
    service can lag its boot, or a busy host its answer) until `give_up_s` has passed; a
    refusal, the deadline, or `wait` saying stop (it returns True) raises the last error."""
    give_up_at = time.monotonic() + give_up_s
    while True:
        try:
            return read()
        except MetadataError as error:
            delay_s = RETRY_DELAY_S * (1.0 + random.random())
            if not error.transient or time.monotonic() + delay_s > give_up_at:
                raise
            on_retry(error)
            if wait(delay_s):
                raise


class CloudMetadata(Protocol):
    def configure(self) -> BootData:
        """Read the boot data and identity proof (MetadataError when something is missing)."""
        ...

    def terminating(self) -> bool:
        """The cloud announced that this VM goes away (pre-emption, eviction)."""
        ...

    def identity_proof(self, audience: str) -> dict[str, str]:
        """The workerIdentityProof alone (audience: the rootUrl, used on GCE only)."""
        ...


@dataclass
class MetadataHttp:
    base_url: str
    ca_bundle: str | None = None

    def get(self, path: str, headers: Mapping[str, str], method: str = "GET") -> str:
        request = urllib.request.Request(self.base_url + path, method=method)
        for name, value in headers.items():
            request.add_header(name, value)
        context = ssl.create_default_context(cafile=self.ca_bundle) if self.ca_bundle else None
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S, context=context) as r:
                return r.read().decode()
        except urllib.error.HTTPError as error:
            raise MetadataError(path, error.code, error.reason) from None
        except OSError as error:
            raise MetadataError(path, 0, str(error)) from None


def complete(path: str, boot: BootData) -> BootData:
    """The boot data, or a MetadataError naming what it lacks (the client cannot even be
    built without a rootUrl)."""
    missing = [
        name
        for name in ("root_url", "provider_id", "worker_pool_id", "worker_group", "worker_id")
        if not getattr(boot, name)
    ]
    if missing:
        raise MetadataError(path, 200, f"boot data without {', '.join(missing)}")
    return boot


def json_object(text: str, path: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise MetadataError(path, 200, "not JSON") from None
    if not isinstance(value, dict):
        raise MetadataError(path, 200, "not a JSON object")
    return value


@dataclass(frozen=True)
class KnownMetadata:
    """Boot data known beforehand instead of read from a metadata service: for tests that
    make (or forge) the proof themselves and only want the agent's API behaviour."""

    boot: BootData

    def configure(self) -> BootData:
        return self.boot

    def terminating(self) -> bool:
        return False

    def identity_proof(self, audience: str) -> dict[str, str]:
        return dict(self.boot.proof)
