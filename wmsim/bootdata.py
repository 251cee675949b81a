"""How worker-runner learns who it is on each cloud: its boot data and identity proof, read
from the VM's metadata service over HTTP, at the paths and with the headers worker-runner uses
(tools/worker-runner/provider/{aws,google,azure}).

- EC2: IMDSv2 token, then `user-data` (JSON rootUrl, workerPoolId, providerId, workerGroup),
  the identity document (workerId = its instanceId) and its signature, `public-hostname` and
  `public-ipv4`; termination: `meta-data/spot/termination-time` exists.
- GCE: `instance/id` (workerId), attribute `taskcluster` (JSON workerPoolId, providerId,
  workerGroup, rootUrl), project, image, machine type, zone, hostname, external and internal
  IP, then the identity token for audience rootUrl; termination: `instance/preempted` = TRUE.
- Azure: `/metadata/instance` (tags worker-pool-id, provider-id, worker-group, root-url in
  compute.tagsList; workerId = compute.name) and the attested document's `signature`
  (must be pkcs7); termination: any scheduled event but Freeze.

As in worker-runner, a metadata read that fails aborts the start; the caller decides what is
worth retrying (`MetadataError.transient`: no answer or a 5xx, what httpbackoff retries).
"""

from __future__ import annotations

import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

HTTP_TIMEOUT_S = 2.0  # worker-runner's metadata client timeout (AWS)
EC2_TOKEN_TTL_S = 21600
AZURE_API_VERSION = "2025-04-07"
AZURE_EVENTS_API_VERSION = "2020-07-01"  # scheduled events only exist in this older version
AZURE_TAGS = {  # tag -> BootData field
    "worker-pool-id": "worker_pool_id",
    "provider-id": "provider_id",
    "worker-group": "worker_group",
    "root-url": "root_url",
}
GCE_METADATA_PATHS = {  # worker-runner's providerMetadata name -> path; a failure aborts
    "project-id": "/project/project-id",
    "image": "/instance/image",
    "instance-type": "/instance/machine-type",
    "zone": "/instance/zone",
    "public-hostname": "/instance/hostname",
    "public-ipv4": "/instance/network-interfaces/0/access-configs/0/external-ip",
    "local-ipv4": "/instance/network-interfaces/0/ip",
}


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


class MetadataError(Exception):
    """A metadata read failed: the worker cannot start (yet)."""

    def __init__(self, path: str, status: int, message: str = "") -> None:
        super().__init__(f"{path}: {status or 'no answer'} {message}".strip())
        self.path = path
        self.status = status  # 0: no answer

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status >= 500


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
class _Http:
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


@dataclass
class Ec2Metadata:
    base_url: str  # the VM's metadata base URL (IMDS's http://169.254.169.254)
    _token: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self) -> BootData:
        user_data = _json_object(self.query("/user-data"), "/user-data")
        proof = self.identity_proof("")
        identity = _json_object(proof["document"], "/dynamic/instance-identity/document")
        return _complete(
            "/user-data",
            BootData(
                root_url=str(user_data.get("rootUrl", "")),
                provider_id=str(user_data.get("providerId", "")),
                worker_pool_id=str(user_data.get("workerPoolId", "")),
                worker_group=str(user_data.get("workerGroup", "")),
                worker_id=str(identity.get("instanceId", "")),
                proof=proof,
                provider_metadata={
                    "instance-id": str(identity.get("instanceId", "")),
                    "region": str(identity.get("region", "")),
                    "availability-zone": str(identity.get("availabilityZone", "")),
                    "local-ipv4": str(identity.get("privateIp", "")),
                    "public-hostname": self.query("/meta-data/public-hostname"),
                    "public-ipv4": self.query("/meta-data/public-ipv4"),
                },
            ),
        )

    def identity_proof(self, audience: str) -> dict[str, str]:
        return {
            "document": self.query("/dynamic/instance-identity/document"),
            "signature": self.query("/dynamic/instance-identity/signature"),
        }

    def terminating(self) -> bool:
        try:
            self.query("/meta-data/spot/termination-time")
        except MetadataError:
            return False
        return True

    def query(self, path: str) -> str:
        """GET <base>/latest<path> with a (cached) IMDSv2 session token; a token refused (it
        expired) is replaced once."""
        try:
            return self._get(path)
        except MetadataError as error:
            if error.status != 401:
                raise
            with self._lock:
                self._token = None
            return self._get(path)

    def _get(self, path: str) -> str:
        http = _Http(self.base_url)
        with self._lock:
            if self._token is None:
                ttl = {"X-aws-ec2-metadata-token-ttl-seconds": str(EC2_TOKEN_TTL_S)}
                self._token = http.get("/latest/api/token", ttl, method="PUT")
            token = self._token
        return http.get("/latest" + path, {"X-aws-ec2-metadata-token": token})


@dataclass
class GceMetadata:
    base_url: str  # the VM's metadata base URL (http://metadata.google.internal)

    def configure(self) -> BootData:
        worker_id = self.query("/instance/id")
        user_data = _json_object(
            self.query("/instance/attributes/taskcluster"), "/instance/attributes/taskcluster"
        )
        found = {name: self.query(path) for name, path in GCE_METADATA_PATHS.items()}
        zone = found["zone"].rsplit("/", 1)[-1]
        root_url = str(user_data.get("rootUrl", ""))
        proof = self.identity_proof(root_url)
        return _complete(
            "/instance/attributes/taskcluster",
            BootData(
                root_url=root_url,
                provider_id=str(user_data.get("providerId", "")),
                worker_pool_id=str(user_data.get("workerPoolId", "")),
                worker_group=str(user_data.get("workerGroup", "")),
                worker_id=worker_id,
                proof=proof,
                provider_metadata={
                    **found,
                    "instance-id": worker_id,
                    "zone": zone,
                    "region": zone[:-2],
                },
            ),
        )

    def identity_proof(self, audience: str) -> dict[str, str]:
        query = urllib.parse.urlencode({"audience": audience, "format": "full"})
        return {"token": self.query(f"/instance/service-accounts/default/identity?{query}")}

    def terminating(self) -> bool:
        try:
            return self.query("/instance/preempted") == "TRUE"
        except MetadataError:
            return False

    def query(self, path: str) -> str:
        return _Http(self.base_url).get("/computeMetadata/v1" + path, {"Metadata-Flavor": "Google"})


@dataclass
class AzureMetadata:
    base_url: str  # the VM's metadata base URL (http://169.254.169.254)
    ca_bundle: str | None = None  # the simulated ARM serves https

    def configure(self) -> BootData:
        instance = _json_object(
            self.query("/metadata/instance", AZURE_API_VERSION), "/metadata/instance"
        )
        proof = self.identity_proof("")
        compute = instance.get("compute") or {}
        tags = {t.get("name"): t.get("value") for t in compute.get("tagsList") or []}
        values: dict[str, str] = {}
        for tag, name in AZURE_TAGS.items():
            if not tags.get(tag):
                raise MetadataError("/metadata/instance", 200, f"did not get {tag} from tags")
            values[name] = str(tags[tag])
        return BootData(
            **values,
            worker_id=str(compute.get("name", "")),
            proof=proof,
            provider_metadata={
                "vm-id": str(compute.get("vmId", "")),
                "instance-type": str(compute.get("vmSize", "")),
                "region": str(compute.get("location", "")),
            },
        )

    def identity_proof(self, audience: str) -> dict[str, str]:
        path = "/metadata/attested/document"
        attested = _json_object(self.query(path, AZURE_API_VERSION), path)
        if attested.get("encoding") != "pkcs7":
            raise MetadataError(
                path, 200, f"expected attested document with format pkcs7, got {attested}"
            )
        return {"document": str(attested.get("signature", ""))}

    def terminating(self) -> bool:
        try:
            events = json.loads(self.query("/metadata/scheduledevents", AZURE_EVENTS_API_VERSION))
        except (MetadataError, ValueError):
            return False
        return any(e.get("EventType") != "Freeze" for e in events.get("Events") or [])

    def query(self, path: str, api_version: str) -> str:
        http = _Http(self.base_url, self.ca_bundle)
        return http.get(f"{path}?api-version={api_version}", {"Metadata": "true"})


def _complete(path: str, boot: BootData) -> BootData:
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


def _json_object(text: str, path: str) -> dict[str, Any]:
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
