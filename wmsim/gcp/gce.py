"""A simulated Google Compute Engine: the REST subset wm uses, in GCE's own JSON shapes.

The real google-cloud-compute client talks to it unchanged (only `api_endpoint` differs), so
what the SDK raises here is what it raises against GCE. Served over plain http: GCE clients
accept an `http://` api_endpoint, and with AnonymousCredentials no token is ever sent.

Real-GCE behaviour copied, and relied upon by wm/providers/gcp.py:
- `requestId` must be a UUID; the same requestId returns the same Operation and does nothing.
- inserting a name that exists answers 409 alreadyExists; a missing instance answers 404.
- list pages hold at most 500 items (`maxResults` above 500 is a 400), `filter` accepts
  `labels.KEY = "VALUE"`-style expressions joined by AND / OR / NOT and parentheses.
- an instance is PROVISIONING, STAGING, RUNNING, STOPPING while it is deleted, then gone (404);
  one that dies out of band (`kill`) is TERMINATED, and a `compute.instances.preempted`
  (or hostError / guestTerminate) system operation is recorded in its zone, as GCE does.
- throttling is a 403 rateLimitExceeded (or 429), a 5xx is a 503 backendError, and a quota
  failure is either an Operation that is DONE with error QUOTA_EXCEEDED (the default: what GCE
  does for most quota checks on insert) or a synchronous 403 quotaExceeded.
- an insert body is checked as GCE checks it (wmsim/gcp/catalog.py): unknown fields, values
  and types are a 400 `invalid`, a missing boot disk too, and a reference to a network,
  subnetwork, image or disk type the cloud does not have a 404 `notFound`. A `default` network
  with a subnetwork per region exists in every project, public images are the usual families;
  networks, subnetworks and images are added with networks.insert, subnetworks.insert and
  images.insert (served, with their get), `add_network` / `add_subnetwork` / `add_image`, or
  POST /_sim/networks, /_sim/subnetworks, /_sim/images.
- Spot (scheduling.provisioningModel SPOT, or preemptible) is what the body says; a pre-empted
  Spot VM is TERMINATED, or gone when its instanceTerminationAction is DELETE.

Inserts are recorded as they reached the cloud, body as sent (camelCase JSON) and the reason
of any refusal: `inserts()` in process, GET /_sim/creates over HTTP. `example_launch_config`
makes a Taskcluster Google launch config the simulation accepts as it is.

Metadata: every instance's metadata server is served at /_vm/<numeric id>/computeMetadata/v1/...
(see wmsim/metadata.py for the addressing and wmsim/gcp/imds.py for the paths): its metadata
items as created (`instance/attributes/taskcluster`), id, zone, image, network, project, the
pre-emption flag, and the identity token of the service account it was created with, whose
`sub` is `service_account_id(email)` (a deterministic stand-in for the account's unique id).

Identity (older tests): GET /_sim/identity/<zone>/<name>?audience=... answers {"token"}, the
instance identity token its metadata server would mint (format=full), an RS256 JWT signed with
the sim's own key; the JWKS is at GET /_sim/jwks and in the file `identity_trust_path` (the provider
config's `identity_jwks`); `mint_identity_token` makes forgeries for tests.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import itertools
import json
import re
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from wmsim import metadata
from wmsim.behaviour import Behaviour, Faults, Outcome, Preemptions, SimVm, lifecycle_state
from wmsim.cloud import SimCloudConfig
from wmsim.gcp import catalog
from wmsim.gcp import imds as imds_gce
from wmsim.gcp.catalog import ApiError, Catalog, CheckedInsert, Image, region_of
from wmsim.gcp.catalog import invalid as _invalid
from wmsim.gcp.catalog import not_found as _not_found
from wmsim.launch_configs import worker_manager
from wmsim.trust import TrustDir, signing_key
from wmsim.wsgi import ServerThread

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

API = "/compute/v1"
LIST_PAGE_SIZE_MAX = 500  # GCE's own cap on maxResults
# Real GCE's operations.wait returns after about 2 minutes even if the operation is not done;
# the simulation returns sooner so a client's loop is exercised without long blocking calls.
OPERATION_WAIT_MAX_S = 2.0
EXAMPLE_MACHINE_TYPE = "e2-standard-2"  # example_launch_config's
EXAMPLE_IMAGE = "projects/debian-cloud/global/images/family/debian-12"
INSTANCE_ID_BASE = 4_300_000_000_000_000_000  # GCE ids are large unsigned 64-bit numbers
# What a kill reason becomes in GCE's system operations.
KILL_OPERATION_TYPES = {
    "preempted": "compute.instances.preempted",
    "host-error": "compute.instances.hostError",
    "guest-terminate": "compute.instances.guestTerminate",
}
SIM_STATES = {  # GCE status -> SimVm.state
    "PROVISIONING": "pending",
    "STAGING": "pending",
    "RUNNING": "running",
    "STOPPING": "stopping",
    "TERMINATED": "stopped",
}

IDENTITY_KEY_NAME = "gce-identity"
IDENTITY_TRUST_FILE = "gce-identity-jwks.json"
IDENTITY_ISSUER = "https://accounts.google.com"
IDENTITY_TOKEN_LIFETIME_S = 3600  # as Google's
SERVICE_ACCOUNT_ID_DIGITS = 21  # Google's numeric service account ids ("uniqueId")
WAIT_FOR_CHANGE_MAX_S = 2.0  # a wait_for_change request answers unchanged after this
WAIT_FOR_CHANGE_POLL_S = 0.05

QuotaStyle = Literal["operation", "http"]


def _backend_error() -> ApiError:
    return ApiError(
        503, "backendError", "Internal error. Please try again or contact Google Support."
    )


@dataclass
class _Vm:
    id: int
    project: str
    zone: str
    name: str
    machine_type: str
    labels: dict[str, str]
    metadata: list[dict[str, str]]
    scheduling: dict[str, Any]
    disks: list[dict[str, Any]]
    network_interfaces: list[dict[str, Any]]
    created_at: float  # monotonic
    created_wall: datetime
    # [{email, scopes}]: the account its metadata server mints identity tokens for (none: none)
    service_accounts: list[dict[str, Any]] = field(default_factory=list)
    deleted_at: float | None = None  # monotonic; when a delete was accepted
    killed_at: datetime | None = None  # wall clock; when it died out of band
    image: str = ""  # the boot disk's source image
    # The body's other fields (description, guestAccelerators, tags...): GCE echoes them.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def spot(self) -> bool:
        return self.scheduling.get("provisioningModel") == "SPOT" or bool(
            self.scheduling.get("preemptible")
        )

    @property
    def path(self) -> str:
        return f"projects/{self.project}/zones/{self.zone}/instances/{self.name}"


@dataclass
class _Op:
    id: int
    name: str
    project: str
    zone: str
    operation_type: str
    target_name: str
    target_id: int
    inserted: datetime
    done_at: float  # monotonic; DONE from then on
    error: dict[str, Any] | None = None  # {"errors": [...]}; set for operations that failed
    http_error: tuple[int, str] | None = None
    status_message: str | None = None


@dataclass(frozen=True)
class InsertRecord:
    """One instances.insert request that reached the simulated cloud, as it was sent."""

    project: str
    zone: str
    request_id: str | None
    body: dict[str, Any]  # the JSON body, camelCase, exactly as received
    error: str | None = None  # the reason of GCE's refusal (`invalid`, `notFound`...), or None


# Fields of an insert body the simulation builds its instance from; the rest is echoed.
BUILT_FIELDS = frozenset(
    {"name", "machineType", "labels", "disks", "networkInterfaces", "metadata", "scheduling"}
    | {"serviceAccounts", "id", "kind", "status", "zone", "selfLink", "creationTimestamp"}
)
INSERTS_KEPT = 10_000  # the newest insert bodies held for tests (a bench makes many more)


@dataclass
class _State:
    vms: dict[tuple[str, str, str], _Vm] = field(default_factory=dict)  # (project, zone, name)
    ops: dict[tuple[str, str, str], _Op] = field(default_factory=dict)  # (project, zone, name)
    request_ids: dict[tuple[str, str], _Op] = field(default_factory=dict)  # (project, requestId)
    zones: set[tuple[str, str]] = field(default_factory=set)  # (project, zone) ever used
    catalog: Catalog = field(default_factory=Catalog)  # networks, subnetworks, images added
    inserts: deque[InsertRecord] = field(default_factory=lambda: deque(maxlen=INSERTS_KEPT))


class SimGce:
    """A GCE REST server on 127.0.0.1 holding instances and zone operations in memory."""

    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        port: int = 0,
        seed: int | None = None,
        quota_style: QuotaStyle = "operation",
        throttle_status: int = 403,
        trust_dir: Path | None = None,
    ) -> None:
        self.faults = Faults(behaviour or Behaviour(), seed=seed)
        self.preemptions = Preemptions(self.faults)
        self.quota_style: QuotaStyle = quota_style
        self.throttle_status = throttle_status  # 403 (GCE's usual) or 429
        self._initial = (self.faults.behaviour.as_dict(), quota_style, throttle_status)
        self._port = port
        self._lock = threading.RLock()
        self._state = _State()
        self._ids = itertools.count(1)
        self._server: ServerThread | None = None
        self._trust = TrustDir(trust_dir, "wm-sim-gce-")
        self._identity_path: Path | None = None
        self._urls = Map(_rules(), strict_slashes=False)
        self._handlers: dict[str, Callable[..., Response]] = {
            "instances.insert": self._insert,
            "instances.get": self._get,
            "instances.delete": self._delete,
            "instances.list": self._list,
            "instances.aggregatedList": self._aggregated_list,
            "zoneOperations.get": self._operation_get,
            "zoneOperations.wait": self._operation_wait,
            "zoneOperations.list": self._operation_list,
            "networks.insert": self._network_insert,
            "networks.get": self._network_get,
            "subnetworks.insert": self._subnetwork_insert,
            "subnetworks.get": self._subnetwork_get,
            "images.insert": self._image_insert,
            "images.get": self._image_get,
            "images.getFromFamily": self._image_get_from_family,
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> SimGce:
        catalog.load_instance_schema()
        self._server = ServerThread(self, port=self._port).start()
        return self

    def stop(self) -> None:
        self.faults.cut_hangs()
        if self._server is not None:
            self._server.stop()
            self._server = None
        with self._lock:
            self._identity_path = None
        self._trust.cleanup()

    @property
    def endpoint(self) -> str:
        """The provider config's `endpoint` (the SDK's `api_endpoint`)."""
        if self._server is None:
            raise RuntimeError("SimGce is not started")
        return self._server.base_url

    def __enter__(self) -> SimGce:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test and demo controls ------------------------------------------------------------------

    def instances(self) -> list[SimVm]:
        """Every VM held, including ones being deleted (for leak checks)."""
        self._preempt_due()
        now = time.monotonic()
        with self._lock:
            out = []
            for vm in self._live_vms(now):
                status = self._status(vm, now)
                out.append(
                    SimVm(
                        cloud_id=str(vm.id),
                        name=vm.name,
                        region=vm.zone,
                        state=SIM_STATES.get(status or "", "gone"),
                        tags=dict(vm.labels),
                        spot=vm.spot,
                    )
                )
            return out

    def kill(self, cloud_id_or_name: str, reason: str = "preempted") -> None:
        """The VM dies out of band: TERMINATED, with GCE's system operation for the reason."""
        with self._lock:
            vm = self._find(cloud_id_or_name)
            vm.killed_at = datetime.now(UTC)
            op_type = KILL_OPERATION_TYPES.get(reason, "compute.instances.guestTerminate")
            op = self._new_op(vm.project, vm.zone, op_type, vm, done_at=time.monotonic())
            op.status_message = reason
            if reason == "preempted" and vm.scheduling.get("instanceTerminationAction") == "DELETE":
                # A Spot VM told to DELETE on pre-emption is gone; only the operation remains.
                del self._state.vms[(vm.project, vm.zone, vm.name)]

    def _preempt_due(self) -> None:
        """Pre-empt the Spot VMs whose time has come (Behaviour.preempt_share)."""
        for vm_id in self.preemptions.due():
            with contextlib.suppress(KeyError):
                self.kill(vm_id, "preempted")

    def remove(self, cloud_id_or_name: str) -> None:
        """The VM vanishes, as if deleted by hand."""
        with self._lock:
            vm = self._find(cloud_id_or_name)
            del self._state.vms[(vm.project, vm.zone, vm.name)]

    def seed_instances(
        self,
        project: str,
        zone: str,
        labels_by_name: Mapping[str, Mapping[str, str]],
        *,
        machine_type: str = "e2-small",
        image: str = "projects/debian-cloud/global/images/family/debian-12",
    ) -> list[str]:
        """Create an instance per name (with its labels) in-process, as instances.insert would,
        without an API request (nothing counted or recorded): large fleets for benchmarks are
        seeded this way. A name already held is an error. Returns their ids, in order."""
        with self._lock:
            self._state.zones.add((project, zone))
            ids = []
            for name, labels in labels_by_name.items():
                if (project, zone, name) in self._state.vms:
                    raise ValueError(f"instance {name!r} exists in {zone}")
                body = {
                    "name": name,
                    "machineType": f"zones/{zone}/machineTypes/{machine_type}",
                    "labels": dict(labels),
                    "disks": [{"boot": True, "initializeParams": {"sourceImage": image}}],
                }
                vm = self._vm_from_body(project, zone, body)
                self._state.vms[(project, zone, name)] = vm
                ids.append(str(vm.id))
            return ids

    def reset(self) -> None:
        """Forget every VM and operation, the networks, subnetworks and images added and the
        inserts recorded; zero the counters, restore the initial behaviour."""
        behaviour, self.quota_style, self.throttle_status = self._initial
        self.faults.cut_hangs()
        with self._lock:
            self._state = _State()
        self.preemptions.clear()
        self.faults.behaviour.update(**behaviour)
        self.faults.reset_counts()

    # -- what the cloud knows besides instances -------------------------------------------------

    def inserts(self) -> list[InsertRecord]:
        """Every instances.insert that reached the cloud (the newest INSERTS_KEPT), oldest
        first, with its body as sent: what a test compares with the launch config."""
        with self._lock:
            return list(self._state.inserts)

    def add_network(self, project: str, name: str, *, auto_subnetworks: bool = False) -> None:
        """A VPC network (custom mode unless `auto_subnetworks`), as networks.insert makes."""
        with self._lock:
            self._state.catalog.add_network(project, name, auto_subnetworks=auto_subnetworks)

    def add_subnetwork(
        self, project: str, region: str, name: str, network: str, ip_cidr_range: str = ""
    ) -> None:
        """A subnetwork of `network` (a name or a reference), as subnetworks.insert makes."""
        with self._lock:
            self._state.catalog.add_subnetwork(
                project, region, name, network, ip_cidr_range or "10.128.0.0/20"
            )

    def add_image(self, project: str, name: str, family: str | None = None) -> None:
        """An image (in a family, if given), as images.insert makes."""
        with self._lock:
            self._state.catalog.add_image(project, name, family)

    # -- identity tokens -------------------------------------------------------------------------

    @property
    def identity_trust_path(self) -> Path:
        """The JWKS file of the keys identity tokens are signed with."""
        with self._lock:
            if self._identity_path is None:
                path = self._trust.path(IDENTITY_TRUST_FILE)
                path.write_text(json.dumps(identity_jwks()))
                self._identity_path = path
            return self._identity_path

    def identity_token(self, zone: str, name: str, audience: str) -> str:
        """The token the instance's metadata server mints for `audience` (format=full)."""
        return self.mint_identity_token(zone, name, audience)

    def mint_identity_token(
        self,
        zone: str,
        name: str,
        audience: str,
        *,
        claims: Mapping[str, Any] | None = None,
        compute_engine: Mapping[str, Any] | None = None,
        header: Mapping[str, Any] | None = None,
        key: rsa.RSAPrivateKey | None = None,
        issued_at: float | None = None,
        lifetime_s: float = IDENTITY_TOKEN_LIFETIME_S,
    ) -> str:
        """A token for the instance with `claims` (top level) and `compute_engine` fields
        replaced, extra `header` fields, another signing `key` or other times: forgeries."""
        import jwt

        issued = int(time.time() if issued_at is None else issued_at)
        engine, account_id = self._engine_claims(zone, name)
        engine = {**engine, **(compute_engine or {})}
        email = self._service_account(zone, name)
        payload = {
            "aud": audience,
            "azp": account_id,
            "exp": int(issued + lifetime_s),
            "iat": issued,
            "iss": IDENTITY_ISSUER,
            "sub": account_id,  # the instance's service account, by its numeric unique id
            "google": {"compute_engine": engine},
            **({"email": email, "email_verified": True} if email else {}),
            **(claims or {}),
        }
        signer = key or signing_key(IDENTITY_KEY_NAME)
        headers = {"kid": _kid(signing_key(IDENTITY_KEY_NAME)), **(header or {})}
        return jwt.encode(payload, signer, algorithm="RS256", headers=headers)

    def _service_account(self, zone: str, name: str) -> str | None:
        with self._lock:
            for vm in self._state.vms.values():
                if (vm.zone, vm.name) == (zone, name) and vm.service_accounts:
                    return str(vm.service_accounts[0].get("email") or "") or None
        return None

    # -- per-VM metadata server ------------------------------------------------------------------

    def metadata_view(self, key: str) -> imds_gce.GceVmView:
        """What the instance's metadata server serves; KeyError when it has none (unknown, not
        booted yet, or terminated)."""
        now = time.monotonic()
        with self._lock:
            vm = self._find(key)
            if self._status(vm, now) not in ("RUNNING", "STOPPING"):
                raise KeyError(key)
            nic = vm.network_interfaces[0] if vm.network_interfaces else {}
            access = (nic.get("accessConfigs") or [{}])[0]
            account = vm.service_accounts[0] if vm.service_accounts else {}
            zone, name = vm.zone, vm.name
            return imds_gce.GceVmView(
                instance_id=str(vm.id),
                name=vm.name,
                project=vm.project,
                project_number=_project_number(vm.project),
                zone=vm.zone,
                machine_type=vm.machine_type,
                image=vm.image,
                network_ip=str(nic.get("networkIP", "")),
                external_ip=access.get("natIP"),
                attributes={str(i.get("key")): str(i.get("value", "")) for i in vm.metadata},
                service_account=account.get("email"),
                scopes=tuple(account.get("scopes") or ()),
                preempted=metadata.announced(
                    self.preemptions.due_at(str(vm.id)), imds_gce.PREEMPT_NOTICE_S
                )
                is not None,
                identity=lambda audience: self.identity_token(zone, name, audience),
            )

    def _metadata(self, request: Request, key: str, path: str) -> metadata.MetaAnswer:
        args = dict(request.args)
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            first = imds_gce.answer(self.metadata_view(key), request.method, path, args, headers)
        except KeyError:
            return metadata.not_found(imds_gce.FLAVOR)
        if args.get("wait_for_change", "").lower() != "true" or first.status != 200:
            return first
        # Answer once the value differs from the one the client holds (last_etag) or from the
        # current one; unchanged after WAIT_FOR_CHANGE_MAX_S, as the server's own timeout.
        held = args.get("last_etag") or imds_gce.etag(first.body)
        timeout_s = min(
            float(args.get("timeout_sec") or WAIT_FOR_CHANGE_MAX_S), WAIT_FOR_CHANGE_MAX_S
        )
        deadline = time.monotonic() + timeout_s
        current = first
        while imds_gce.etag(current.body) == held and time.monotonic() < deadline:
            time.sleep(WAIT_FOR_CHANGE_POLL_S)
            try:
                current = imds_gce.answer(self.metadata_view(key), "GET", path, args, headers)
            except KeyError:
                return metadata.not_found(imds_gce.FLAVOR)
        etag = ("ETag", imds_gce.etag(current.body))
        return metadata.MetaAnswer(
            current.status, current.body, current.content_type, (*current.headers, etag)
        )

    def _engine_claims(self, zone: str, name: str) -> tuple[dict[str, Any], str]:
        """The token's compute_engine claims and its `sub`: the unique id of the VM's service
        account. A VM without one gets no token, as on GCE."""
        now = time.monotonic()
        with self._lock:
            for vm in self._live_vms(now):
                if (vm.zone, vm.name) == (zone, name) and self._status(vm, now) != "TERMINATED":
                    if not vm.service_accounts:
                        raise KeyError(f"{zone}/{name} has no service account: no identity")
                    engine = {
                        "instance_creation_timestamp": int(vm.created_wall.timestamp()),
                        "instance_id": str(vm.id),
                        "instance_name": vm.name,
                        "project_id": vm.project,
                        "project_number": _project_number(vm.project),
                        "zone": vm.zone,
                    }
                    return engine, service_account_id(vm.service_accounts[0]["email"])
        raise KeyError(f"{zone}/{name}")

    # -- WSGI ------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        self._preempt_due()
        request = Request(environ)
        if (vm := metadata.vm_path(request.path)) is not None:
            return metadata.respond(start_response, self._metadata(request, *vm))
        try:
            endpoint, args = self._urls.bind_to_environ(environ).match()
        except NotFound:
            response = ApiError(404, "notFound", f"Unknown path {request.path}").response()
        except MethodNotAllowed:
            response = ApiError(405, "methodNotAllowed", "Method not allowed").response()
        except HTTPException as exc:  # pragma: no cover - werkzeug redirects and the like
            response = exc.get_response(environ)
        else:
            if endpoint.startswith("sim."):
                response = self._control(endpoint, request, args)
            else:
                response = self._api(endpoint, request, args)
        return response(environ, start_response)

    def _api(self, operation: str, request: Request, args: dict[str, str]) -> Response:
        if operation == "instances.insert":
            outcome = self.faults.before(
                operation,
                key=request.args.get("requestId"),
                params=request.get_json(force=True, silent=True),
                vms=1,
            )
        else:
            outcome = self.faults.before(operation)
        try:
            if outcome is Outcome.THROTTLE:
                raise self._throttle_error()
            if outcome is Outcome.FAIL:
                raise _backend_error()
            response = self._handlers[operation](request, **args)
        except ApiError as error:
            response = error.response()
        except Exception:  # a bug in the simulation: answer like GCE, keep the trace visible
            response = ApiError(500, "backendError", traceback.format_exc(limit=3)).response()
        if outcome is Outcome.LOST:  # carried out; the client never hears of it
            self.faults.hold_lost_answer()
            response = _backend_error().response()
        return response

    def _throttle_error(self) -> ApiError:
        retry_after = self.faults.behaviour.retry_after_s
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after else {}
        if self.throttle_status == 429:
            return ApiError(429, "rateLimitExceeded", "Too Many Requests", headers=headers)
        return ApiError(
            403, "rateLimitExceeded", "Rate Limit Exceeded", domain="usageLimits", headers=headers
        )

    # -- instances -------------------------------------------------------------------------------

    def _insert(self, request: Request, project: str, zone: str) -> Response:
        body = request.get_json(force=True, silent=True)
        if not isinstance(body, dict):
            raise ApiError(400, "parseError", "Parse Error")
        request_id = _request_id(request)
        with self._lock:
            try:
                response = self._insert_body(project, zone, body, request_id)
            except ApiError as error:
                self._state.inserts.append(
                    InsertRecord(project, zone, request_id, body, error.reason)
                )
                raise
            self._state.inserts.append(InsertRecord(project, zone, request_id, body))
            return response

    def _insert_body(
        self, project: str, zone: str, body: dict[str, Any], request_id: str | None
    ) -> Response:
        self._state.zones.add((project, zone))
        if request_id and (project, request_id) in self._state.request_ids:
            return self._op_response(self._state.request_ids[(project, request_id)])
        vm = self._vm_from_body(project, zone, body)
        now = time.monotonic()
        existing = self._state.vms.get((project, zone, vm.name))
        if existing is not None and self._status(existing, now) is not None:
            raise ApiError(409, "alreadyExists", f"The resource '{vm.path}' already exists")
        quota = self.faults.behaviour.quota_instances
        if quota is not None and self._live_count(now) >= quota:
            op = self._quota_failure(project, zone, vm, quota)
        else:
            self._state.vms[(project, zone, vm.name)] = vm
            boot_s = self.faults.behaviour.boot_s
            if vm.spot:
                self.preemptions.schedule(str(vm.id), now + boot_s)
            op = self._new_op(project, zone, "insert", vm, done_at=now + boot_s)
        if request_id:
            self._state.request_ids[(project, request_id)] = op
        return self._op_response(op)

    def _quota_failure(self, project: str, zone: str, vm: _Vm, quota: int) -> _Op:
        region = zone.rsplit("-", 1)[0]
        message = f"Quota 'INSTANCES' exceeded.  Limit: {quota:.1f} in region {region}."
        if self.quota_style == "http":
            raise ApiError(403, "quotaExceeded", message, domain="usageLimits")
        op = self._new_op(project, zone, "insert", vm, done_at=time.monotonic())
        op.error = {
            "errors": [
                {
                    "code": "QUOTA_EXCEEDED",
                    "message": message,
                    "errorDetails": [
                        {
                            "quotaInfo": {
                                "metricName": "compute.googleapis.com/instances",
                                "limitName": "INSTANCES-per-project-region",
                                "dimensions": {"region": region},
                                "limit": quota,
                            }
                        }
                    ],
                }
            ]
        }
        op.http_error = (403, "FORBIDDEN")
        return op

    def _get(self, request: Request, project: str, zone: str, name: str) -> Response:
        now = time.monotonic()
        with self._lock:
            vm = self._named(project, zone, name)
            status = self._status(vm, now) if vm else None
            if vm is None or status is None:
                raise _not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            return _json(self._instance_json(vm, status, now, request))

    def _delete(self, request: Request, project: str, zone: str, name: str) -> Response:
        request_id = _request_id(request)
        now = time.monotonic()
        with self._lock:
            if request_id and (project, request_id) in self._state.request_ids:
                return self._op_response(self._state.request_ids[(project, request_id)])
            vm = self._named(project, zone, name)
            if vm is None or self._status(vm, now) is None:
                raise _not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            if vm.deleted_at is None:
                vm.deleted_at = now
            done_at = vm.deleted_at + self.faults.behaviour.delete_s
            op = self._new_op(project, zone, "delete", vm, done_at=done_at)
            if request_id:
                self._state.request_ids[(project, request_id)] = op
            return self._op_response(op)

    def _list(self, request: Request, project: str, zone: str) -> Response:
        page_size = self._page_size(request)
        match = _filter(request.args.get("filter", ""))
        now = time.monotonic()
        with self._lock:
            self._state.zones.add((project, zone))
            items = []
            for vm in sorted(self._live_vms(now), key=lambda v: v.name):
                if (vm.project, vm.zone) == (project, zone):
                    item = self._instance_json(vm, self._status(vm, now) or "", now, request)
                    if match(item):
                        items.append(item)
        page, token = _page(items, request.args.get("pageToken", ""), page_size, "name")
        base = _base(request)
        body: dict[str, Any] = {
            "kind": "compute#instanceList",
            "id": f"projects/{project}/zones/{zone}/instances",
            "selfLink": f"{base}/projects/{project}/zones/{zone}/instances",
        }
        if page:
            body["items"] = page
        if token:
            body["nextPageToken"] = token
        return _json(body)

    def _aggregated_list(self, request: Request, project: str) -> Response:
        page_size = self._page_size(request)
        match = _filter(request.args.get("filter", ""))
        now = time.monotonic()
        with self._lock:
            zones = sorted(z for p, z in self._state.zones if p == project)
            items = []
            for vm in sorted(self._live_vms(now), key=lambda v: (v.zone, v.name)):
                if vm.project == project:
                    item = self._instance_json(vm, self._status(vm, now) or "", now, request)
                    item["_key"] = f"{vm.zone}/{vm.name}"
                    if match(item):
                        items.append(item)
        page, token = _page(items, request.args.get("pageToken", ""), page_size, "_key")
        scoped = {f"zones/{zone}": _scoped(zone, page) for zone in zones}
        body: dict[str, Any] = {
            "kind": "compute#instanceAggregatedList",
            "id": f"projects/{project}/aggregated/instances",
            "items": scoped,
            "selfLink": f"{_base(request)}/projects/{project}/aggregated/instances",
        }
        if token:
            body["nextPageToken"] = token
        return _json(body)

    def _page_size(self, request: Request) -> int:
        raw = request.args.get("maxResults", str(LIST_PAGE_SIZE_MAX))
        if not raw.isdigit() or int(raw) > LIST_PAGE_SIZE_MAX:
            raise _invalid("maxResults", raw, f"Must be less than or equal to {LIST_PAGE_SIZE_MAX}")
        size = int(raw) or LIST_PAGE_SIZE_MAX
        cap = self.faults.behaviour.page_size_max
        return min(size, cap) if cap else size

    # -- networks, subnetworks, images ----------------------------------------------------------

    def _network_insert(self, request: Request, project: str) -> Response:
        body = _body(request)
        with self._lock:
            network = self._state.catalog.add_network(
                project,
                body.get("name", ""),
                auto_subnetworks=bool(body.get("autoCreateSubnetworks")),
            )
        return _json(self._done_op(request, project, "global", network.path))

    def _network_get(self, request: Request, project: str, name: str) -> Response:
        with self._lock:
            network = self._state.catalog.network(project, name)
            subnetworks = [
                sub.path
                for sub in self._state.catalog.subnetworks.values()
                if network is not None and sub.network == network.path
            ]
        if network is None:
            raise _not_found(f"projects/{project}/global/networks/{name}")
        base = _base(request)
        return _json(
            {
                "kind": "compute#network",
                "id": _resource_id(network.path),
                "name": network.name,
                "selfLink": f"{base}/{network.path}",
                "autoCreateSubnetworks": network.auto_subnetworks,
                "subnetworks": [f"{base}/{path}" for path in subnetworks],
                "routingConfig": {"routingMode": "REGIONAL"},
            }
        )

    def _subnetwork_insert(self, request: Request, project: str, region: str) -> Response:
        body = _body(request)
        if body.get("network") is None:
            raise _invalid(
                "resource.network", "", "Required field 'resource.network' not specified"
            )
        with self._lock:
            subnetwork = self._state.catalog.add_subnetwork(
                project,
                region,
                body.get("name", ""),
                body["network"],
                str(body.get("ipCidrRange") or "10.128.0.0/20"),
            )
        return _json(self._done_op(request, project, f"regions/{region}", subnetwork.path))

    def _subnetwork_get(self, request: Request, project: str, region: str, name: str) -> Response:
        with self._lock:
            subnetwork = self._state.catalog.subnetwork(project, region, name)
        if subnetwork is None:
            raise _not_found(f"projects/{project}/regions/{region}/subnetworks/{name}")
        base = _base(request)
        return _json(
            {
                "kind": "compute#subnetwork",
                "id": _resource_id(subnetwork.path),
                "name": subnetwork.name,
                "network": f"{base}/{subnetwork.network}",
                "ipCidrRange": subnetwork.ip_cidr_range,
                "region": f"{base}/projects/{project}/regions/{region}",
                "selfLink": f"{base}/{subnetwork.path}",
            }
        )

    def _image_insert(self, request: Request, project: str) -> Response:
        body = _body(request)
        with self._lock:
            image = self._state.catalog.add_image(project, body.get("name", ""), body.get("family"))
        return _json(self._done_op(request, project, "global", image.path))

    def _image_get(self, request: Request, project: str, name: str) -> Response:
        with self._lock:
            image = self._state.catalog.image(project, name)
        if image is None:
            raise _not_found(f"projects/{project}/global/images/{name}")
        return _json(_image_json(request, image))

    def _image_get_from_family(self, request: Request, project: str, family: str) -> Response:
        with self._lock:
            image = self._state.catalog.image(project, family, family=True)
        if image is None:
            raise _not_found(f"projects/{project}/global/images/family/{family}")
        return _json(_image_json(request, image))

    def _done_op(self, request: Request, project: str, scope: str, target: str) -> dict[str, Any]:
        """A finished global or regional Operation: these resources are made at once."""
        base = _base(request)
        stamp = _stamp(datetime.now(UTC))
        name = f"operation-{int(time.time() * 1000)}-{uuid.uuid4().hex[:13]}"
        op: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(INSTANCE_ID_BASE + next(self._ids)),
            "name": name,
            "operationType": "insert",
            "targetLink": f"{base}/{target}",
            "targetId": _resource_id(target),
            "status": "DONE",
            "user": "anonymous",
            "progress": 100,
            "insertTime": stamp,
            "startTime": stamp,
            "endTime": stamp,
            "selfLink": f"{base}/projects/{project}/{scope}/operations/{name}",
        }
        if scope.startswith("regions/"):
            op["region"] = f"{base}/projects/{project}/{scope}"
        return op

    # -- zone operations -------------------------------------------------------------------------

    def _operation_get(self, request: Request, project: str, zone: str, operation: str) -> Response:
        return self._op_response(self._op(project, zone, operation))

    def _operation_wait(
        self, request: Request, project: str, zone: str, operation: str
    ) -> Response:
        op = self._op(project, zone, operation)
        remaining = op.done_at - time.monotonic()
        if remaining > 0:
            time.sleep(min(remaining, OPERATION_WAIT_MAX_S))
        return self._op_response(op)

    def _operation_list(self, request: Request, project: str, zone: str) -> Response:
        page_size = self._page_size(request)
        match = _filter(request.args.get("filter", ""))
        with self._lock:
            ops = [o for (p, z, _), o in self._state.ops.items() if (p, z) == (project, zone)]
        items = [j for j in (self._op_json(o, request) for o in sorted(ops, key=_op_order))]
        page, token = _page(
            [i for i in items if match(i)], request.args.get("pageToken", ""), page_size, "name"
        )
        body: dict[str, Any] = {
            "kind": "compute#operationList",
            "id": f"projects/{project}/zones/{zone}/operations",
            "selfLink": f"{_base(request)}/projects/{project}/zones/{zone}/operations",
        }
        if page:
            body["items"] = page
        if token:
            body["nextPageToken"] = token
        return _json(body)

    def _op(self, project: str, zone: str, operation: str) -> _Op:
        with self._lock:
            op = self._state.ops.get((project, zone, operation))
        if op is None:
            raise _not_found(f"projects/{project}/zones/{zone}/operations/{operation}")
        return op

    # -- internals -------------------------------------------------------------------------------

    def _vm_from_body(self, project: str, zone: str, body: Mapping[str, Any]) -> _Vm:
        checked = self._state.catalog.check_insert(project, zone, body)
        vm_id = INSTANCE_ID_BASE + next(self._ids)
        return _Vm(
            image=checked.image,
            id=vm_id,
            project=project,
            zone=zone,
            name=checked.name,
            machine_type=checked.machine_type,
            labels=checked.labels,
            metadata=checked.metadata,
            scheduling=checked.scheduling,
            disks=[_attached_disk(i, disk) for i, disk in enumerate(checked.disks)],
            network_interfaces=_interfaces(checked, vm_id),
            created_at=time.monotonic(),
            created_wall=datetime.now(UTC),
            service_accounts=checked.service_accounts,
            extra={k: v for k, v in body.items() if k not in BUILT_FIELDS},
        )

    def _new_op(self, project: str, zone: str, op_type: str, vm: _Vm, *, done_at: float) -> _Op:
        op_id = INSTANCE_ID_BASE + next(self._ids)
        stamp = int(time.time() * 1000)
        name = f"operation-{stamp}-{uuid.uuid4().hex[:13]}-{uuid.uuid4().hex[:8]}"
        if op_type.startswith("compute.instances."):
            name = f"systemevent-{stamp}-{op_type.rsplit('.', 1)[1].lower()}-{vm.name}"
        op = _Op(
            id=op_id,
            name=name,
            project=project,
            zone=zone,
            operation_type=op_type,
            target_name=vm.name,
            target_id=vm.id,
            inserted=datetime.now(UTC),
            done_at=done_at,
        )
        self._state.ops[(project, zone, name)] = op
        return op

    def _op_response(self, op: _Op) -> Response:
        return _json(self._op_json(op, None))

    def _op_json(self, op: _Op, request: Request | None) -> dict[str, Any]:
        base = self.endpoint + API if request is None else _base(request)
        done = time.monotonic() >= op.done_at
        zone_url = f"{base}/projects/{op.project}/zones/{op.zone}"
        out: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(op.id),
            "name": op.name,
            "zone": zone_url,
            "operationType": op.operation_type,
            "targetLink": f"{zone_url}/instances/{op.target_name}",
            "targetId": str(op.target_id),
            "status": "DONE" if done else "RUNNING",
            "user": "system" if op.operation_type.startswith("compute.") else "anonymous",
            "progress": 100 if done else 0,
            "insertTime": _stamp(op.inserted),
            "startTime": _stamp(op.inserted),
            "selfLink": f"{zone_url}/operations/{op.name}",
        }
        if done:
            out["endTime"] = _stamp(op.inserted)
        if op.status_message:
            out["statusMessage"] = op.status_message
        if op.error:
            out["error"] = op.error
        if op.http_error:
            out["httpErrorStatusCode"], out["httpErrorMessage"] = op.http_error
        return out

    def _status(self, vm: _Vm, now: float) -> str | None:
        """GCE's status for the VM now, or None once it is gone."""
        b = self.faults.behaviour
        life = lifecycle_state(now, vm.created_at, b.boot_s, vm.deleted_at, b.delete_s)
        if life == "gone":
            return None
        if life == "stopping":
            return "STOPPING"
        if vm.killed_at is not None:
            return "TERMINATED"
        if life == "pending":
            return "PROVISIONING" if now < vm.created_at + b.boot_s / 2 else "STAGING"
        return "RUNNING"

    def _live_vms(self, now: float) -> list[_Vm]:
        """VMs that still exist; gone ones are forgotten here, lazily."""
        gone = [key for key, vm in self._state.vms.items() if self._status(vm, now) is None]
        for key in gone:
            del self._state.vms[key]
        return list(self._state.vms.values())

    def _named(self, project: str, zone: str, name: str) -> _Vm | None:
        """The instance a path names: by name, or by its numeric id as GCE also takes it
        (worker-manager gets and deletes its instances by id: its workerId)."""
        vm = self._state.vms.get((project, zone, name))
        if vm is None and name.isdigit():
            vm = next(
                (
                    v
                    for v in self._state.vms.values()
                    if (v.project, v.zone) == (project, zone) and str(v.id) == name
                ),
                None,
            )
        return vm

    def _live_count(self, now: float) -> int:
        return sum(1 for vm in self._live_vms(now) if vm.deleted_at is None)

    def _find(self, cloud_id_or_name: str) -> _Vm:
        for vm in self._live_vms(time.monotonic()):
            if cloud_id_or_name in (str(vm.id), vm.name):
                return vm
        raise KeyError(cloud_id_or_name)

    def _instance_json(self, vm: _Vm, status: str, now: float, request: Request) -> dict[str, Any]:
        base = _base(request)
        zone_url = f"{base}/projects/{vm.project}/zones/{vm.zone}"
        out: dict[str, Any] = {
            **vm.extra,
            "kind": "compute#instance",
            "id": str(vm.id),
            "creationTimestamp": _stamp(vm.created_wall),
            "name": vm.name,
            "tags": {"fingerprint": "42WmSpB8rSM="},
            "machineType": f"{zone_url}/machineTypes/{vm.machine_type}",
            "status": status,
            "zone": zone_url,
            "canIpForward": False,
            "networkInterfaces": [
                {
                    **nic,
                    "network": f"{base}/{nic['network']}",
                    "subnetwork": f"{base}/{nic['subnetwork']}",
                }
                for nic in vm.network_interfaces
            ],
            "disks": vm.disks,
            "metadata": {
                "kind": "compute#metadata",
                "fingerprint": _fingerprint(vm.metadata),
                "items": vm.metadata,
            },
            "selfLink": f"{zone_url}/instances/{vm.name}",
            "scheduling": vm.scheduling,
            "serviceAccounts": vm.service_accounts,
            "labels": vm.labels,
            "labelFingerprint": _fingerprint(vm.labels),
            "startRestricted": False,
            "deletionProtection": False,
        }
        if status in ("RUNNING", "STOPPING", "TERMINATED"):
            out["cpuPlatform"] = "Intel Broadwell"
            out["lastStartTimestamp"] = _stamp(vm.created_wall)
        if vm.killed_at is not None:
            out["lastStopTimestamp"] = _stamp(vm.killed_at)
        if not vm.metadata:
            del out["metadata"]["items"]
        if not vm.service_accounts:
            del out["serviceAccounts"]
        return out

    # -- /_sim control endpoints -----------------------------------------------------------------

    def _control(
        self, endpoint: str, request: Request, args: Mapping[str, str] | None = None
    ) -> Response:
        body = request.get_json(force=True, silent=True) or {}
        args = args or {}
        try:
            match endpoint:
                case "sim.identity":
                    audience = request.args.get("audience", "")
                    if not audience:
                        return _json({"error": "audience is required"}, 400)
                    token = self.identity_token(args["zone"], args["name"], audience)
                    return _json({"token": token})
                case "sim.jwks":
                    return _json(identity_jwks())
                case "sim.requests":
                    return _json(self.faults.counts())
                case "sim.requests.reset":
                    self.faults.reset_counts()
                case "sim.behaviour":
                    self.faults.behaviour.update(**body)
                    return _json(self.faults.behaviour.as_dict())
                case "sim.instances":
                    return _json([asdict(vm) | {"tags": dict(vm.tags)} for vm in self.instances()])
                case "sim.kill":
                    self.kill(str(body["id"]), str(body.get("reason", "preempted")))
                case "sim.remove":
                    self.remove(str(body["id"]))
                case "sim.reset":
                    self.reset()
                case "sim.creates":
                    return _json([asdict(record) for record in self.inserts()])
                case "sim.networks":
                    self.add_network(
                        str(body["project"]),
                        str(body["name"]),
                        auto_subnetworks=bool(body.get("autoCreateSubnetworks")),
                    )
                case "sim.subnetworks":
                    self.add_subnetwork(
                        str(body["project"]),
                        str(body["region"]),
                        str(body["name"]),
                        str(body["network"]),
                        str(body.get("ipCidrRange") or ""),
                    )
                case "sim.images":
                    family = body.get("family")
                    self.add_image(
                        str(body["project"]),
                        str(body["name"]),
                        None if family is None else str(family),
                    )
        except ApiError as error:
            return error.response()
        except KeyError as exc:
            return _json({"error": f"no such instance or field: {exc}"}, 404)
        except (TypeError, ValueError) as exc:
            return _json({"error": str(exc)}, 400)
        return _json({"ok": True})


def serve(config: SimCloudConfig, state_dir: Path) -> SimGce:
    """Start the simulated GCE for `wmsim serve` (plain http); the JWKS of its identity tokens
    goes into state_dir."""
    sim = SimGce(Behaviour.from_config(config), port=config.port, trust_dir=state_dir).start()
    _ = sim.identity_trust_path  # written now, so a config can name it before any worker boots
    return sim


def example_launch_config(
    zone: str,
    *,
    machine_type: str = EXAMPLE_MACHINE_TYPE,
    image: str | None = None,
    spot: bool = False,
    public_ip: bool = True,
    capacity: int = 1,
    launch_config_id: str | None = None,
    weight: float | None = None,
    max_capacity: int | None = None,
    worker_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Taskcluster Google launch config (worker-manager's config-google.yml: the
    instances.insert body plus region, zone, workerConfig, workerManager) that the simulation
    accepts as it is: a boot disk from a public image it knows, the `default` network with an
    external IP when `public_ip` (worker-runner on GCE reads one), Spot scheduling when `spot`.

    `machine_type` is a name (made zone-qualified, as GCE's docs and Taskcluster's own
    configurations write it) or a reference used as given; `weight` is
    workerManager.initialWeight (0..1)."""
    manager = worker_manager(
        capacity=capacity,
        launch_config_id=launch_config_id,
        weight=weight,
        max_capacity=max_capacity,
    )
    interface: dict[str, Any] = {"network": "global/networks/default"}
    if public_ip:
        interface["accessConfigs"] = [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    # STOP, not DELETE: a pre-empted worker stays visible as TERMINATED, so a scan learns why
    # it died before deleting it.
    scheduling = (
        {
            "provisioningModel": "SPOT",
            "onHostMaintenance": "TERMINATE",
            "instanceTerminationAction": "STOP",
        }
        if spot
        else {}
    )
    return {
        "region": region_of(zone),
        "zone": zone,
        "machineType": machine_type
        if "/" in machine_type
        else f"zones/{zone}/machineTypes/{machine_type}",
        "disks": [
            {
                "type": "PERSISTENT",
                "boot": True,
                "autoDelete": True,
                "initializeParams": {"sourceImage": image or EXAMPLE_IMAGE},
            }
        ],
        "networkInterfaces": [interface],
        "scheduling": scheduling,
        "workerConfig": copy.deepcopy(dict(worker_config or {})),
        "workerManager": manager,
    }


def identity_jwks() -> dict[str, Any]:
    """The public JWKS of the process's GCE identity key, in Google's shape."""
    import jwt

    key = signing_key(IDENTITY_KEY_NAME)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**jwk, "kid": _kid(key), "alg": "RS256", "use": "sig"}]}


def _kid(key: rsa.RSAPrivateKey) -> str:
    numbers = key.public_key().public_numbers()
    return hashlib.sha256(f"{numbers.n}:{numbers.e}".encode()).hexdigest()[:40]


def service_account_id(email: str) -> str:
    """The numeric unique id of the service account with this email (what identity tokens
    carry as `sub`): a stable function of the email, so a config can name it in advance."""
    digest = int.from_bytes(hashlib.sha256(email.encode()).digest()[:12], "big")
    return "1" + str(digest % 10 ** (SERVICE_ACCOUNT_ID_DIGITS - 1)).zfill(
        SERVICE_ACCOUNT_ID_DIGITS - 1
    )


def _project_number(project: str) -> int:
    return int(hashlib.sha256(project.encode()).hexdigest()[:11], 16)


def _resource_id(path: str) -> str:
    """A stable numeric id for a network, subnetwork or image (GCE's are unsigned 64-bit)."""
    return str(int.from_bytes(hashlib.sha256(path.encode()).digest()[:8], "big"))


def _image_json(request: Request, image: Image) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "compute#image",
        "id": _resource_id(image.path),
        "name": image.name,
        "status": "READY",
        "diskSizeGb": "10",
        "selfLink": f"{_base(request)}/{image.path}",
    }
    if image.family:
        out["family"] = image.family
    return out


def _body(request: Request) -> dict[str, Any]:
    body = request.get_json(force=True, silent=True)
    if not isinstance(body, dict):
        raise ApiError(400, "parseError", "Parse Error")
    return body


def _attached_disk(index: int, disk: Mapping[str, Any]) -> dict[str, Any]:
    """An attached disk as instances.get shows it."""
    params = disk.get("initializeParams") or {}
    return {
        "kind": "compute#attachedDisk",
        "type": disk["type"],
        "mode": disk.get("mode", "READ_WRITE"),
        "deviceName": disk.get("deviceName", f"persistent-disk-{index}"),
        "index": index,
        "boot": bool(disk.get("boot")),
        "autoDelete": bool(disk.get("autoDelete", False)),
        "interface": disk.get("interface", "SCSI"),
        "diskSizeGb": str(params.get("diskSizeGb", "375" if disk["type"] == "SCRATCH" else "10")),
    }


def _interfaces(checked: CheckedInsert, vm_id: int) -> list[dict[str, Any]]:
    """The network interfaces as instances.get shows them (paths; URLs added when served)."""
    out = []
    for index, nic in enumerate(checked.nics):
        interface: dict[str, Any] = {
            "kind": "compute#networkInterface",
            "name": f"nic{index}",
            "network": nic.network,
            "subnetwork": nic.subnetwork,
            "networkIP": f"10.128.{(vm_id >> 8) & 255}.{vm_id & 255}",
            "stackType": "IPV4_ONLY",
        }
        if nic.access_configs:
            interface["accessConfigs"] = [
                {
                    "kind": "compute#accessConfig",
                    "name": config.get("name", "External NAT"),
                    "type": config.get("type", "ONE_TO_ONE_NAT"),
                    "natIP": f"34.{(vm_id >> 16) & 255}.{(vm_id >> 8) & 255}.{vm_id & 255}",
                    "networkTier": config.get("networkTier", "PREMIUM"),
                }
                for config in nic.access_configs
            ]
        out.append(interface)
    return out


# -- routing ---------------------------------------------------------------------------------------


def _rules() -> list[Rule]:
    zone = f"{API}/projects/<project>/zones/<zone>"
    region = f"{API}/projects/<project>/regions/<region>"
    glob = f"{API}/projects/<project>/global"
    return [
        Rule(f"{zone}/instances", methods=["GET"], endpoint="instances.list"),
        Rule(f"{zone}/instances", methods=["POST"], endpoint="instances.insert"),
        Rule(f"{zone}/instances/<name>", methods=["GET"], endpoint="instances.get"),
        Rule(f"{zone}/instances/<name>", methods=["DELETE"], endpoint="instances.delete"),
        Rule(f"{zone}/operations", methods=["GET"], endpoint="zoneOperations.list"),
        Rule(f"{zone}/operations/<operation>", methods=["GET"], endpoint="zoneOperations.get"),
        Rule(
            f"{zone}/operations/<operation>/wait", methods=["POST"], endpoint="zoneOperations.wait"
        ),
        Rule(f"{glob}/networks", methods=["POST"], endpoint="networks.insert"),
        Rule(f"{glob}/networks/<name>", methods=["GET"], endpoint="networks.get"),
        Rule(f"{region}/subnetworks", methods=["POST"], endpoint="subnetworks.insert"),
        Rule(f"{region}/subnetworks/<name>", methods=["GET"], endpoint="subnetworks.get"),
        Rule(f"{glob}/images", methods=["POST"], endpoint="images.insert"),
        Rule(f"{glob}/images/<name>", methods=["GET"], endpoint="images.get"),
        Rule(f"{glob}/images/family/<family>", methods=["GET"], endpoint="images.getFromFamily"),
        Rule(
            f"{API}/projects/<project>/aggregated/instances",
            methods=["GET"],
            endpoint="instances.aggregatedList",
        ),
        Rule("/_sim/requests", methods=["GET"], endpoint="sim.requests"),
        Rule("/_sim/requests/reset", methods=["POST"], endpoint="sim.requests.reset"),
        Rule("/_sim/behaviour", methods=["POST"], endpoint="sim.behaviour"),
        Rule("/_sim/instances", methods=["GET"], endpoint="sim.instances"),
        Rule("/_sim/kill", methods=["POST"], endpoint="sim.kill"),
        Rule("/_sim/remove", methods=["POST"], endpoint="sim.remove"),
        Rule("/_sim/reset", methods=["POST"], endpoint="sim.reset"),
        Rule("/_sim/creates", methods=["GET"], endpoint="sim.creates"),
        Rule("/_sim/networks", methods=["POST"], endpoint="sim.networks"),
        Rule("/_sim/subnetworks", methods=["POST"], endpoint="sim.subnetworks"),
        Rule("/_sim/images", methods=["POST"], endpoint="sim.images"),
        Rule("/_sim/identity/<zone>/<name>", methods=["GET"], endpoint="sim.identity"),
        Rule("/_sim/jwks", methods=["GET"], endpoint="sim.jwks"),
    ]


# -- request validation, as GCE does it ------------------------------------------------------------


def _request_id(request: Request) -> str | None:
    request_id = request.args.get("requestId")
    if request_id is None:
        return None
    try:
        parsed = uuid.UUID(request_id)
    except ValueError:
        parsed = None
    if parsed is None or parsed.int == 0:
        raise _invalid(
            "requestId",
            request_id,
            "The request ID must be a valid UUID with the exception that zero UUID is not "
            "supported (00000000-0000-0000-0000-000000000000).",
        )
    return request_id


# -- list filters ----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r'\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<op>!=|=|:)|(?P<str>"(?:[^"\\]|\\.)*")|(?P<word>[^\s()=!:"]+))'
)
Predicate = Callable[[Mapping[str, Any]], bool]


def _filter(text: str) -> Predicate:
    """Compile a GCE list filter: `labels.k = "v"`, `status != RUNNING`, `labels.k:*`, joined
    by AND / OR (AND binds tighter), NOT or `-` to negate, parentheses to group. A bare
    juxtaposition of terms means AND, as in GCE."""
    tokens = _tokenize(text)
    if not tokens:
        return lambda _item: True
    parser = _FilterParser(tokens, text)
    predicate = parser.expression()
    if parser.position != len(tokens):
        raise _invalid("filter", text, "Invalid list filter expression.")
    return predicate


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise _invalid("filter", text, "Invalid list filter expression.")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _FilterParser:
    def __init__(self, tokens: list[tuple[str, str]], text: str) -> None:
        self.tokens = tokens
        self.text = text
        self.position = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise _invalid("filter", self.text, "Invalid list filter expression.")
        self.position += 1
        return token

    def expression(self) -> Predicate:
        terms = [self._conjunction()]
        while self._peek() == ("word", "OR"):
            self._take()
            terms.append(self._conjunction())
        return terms[0] if len(terms) == 1 else lambda item: any(t(item) for t in terms)

    def _conjunction(self) -> Predicate:
        terms = [self._unary()]
        while (token := self._peek()) is not None and token not in (("rp", ")"), ("word", "OR")):
            if token == ("word", "AND"):
                self._take()
            terms.append(self._unary())
        return terms[0] if len(terms) == 1 else lambda item: all(t(item) for t in terms)

    def _unary(self) -> Predicate:
        token = self._take()
        if token == ("word", "NOT") or (token[0] == "word" and token[1] == "-"):
            inner = self._unary()
            return lambda item: not inner(item)
        if token[0] == "lp":
            inner = self.expression()
            if self._take()[0] != "rp":
                raise _invalid("filter", self.text, "Unbalanced parentheses.")
            return inner
        if token[0] != "word":
            raise _invalid("filter", self.text, "Invalid list filter expression.")
        negate = token[1].startswith("-")
        path = token[1].lstrip("-")
        op = self._take()
        value_token = self._take()
        if op[0] != "op" or value_token[0] not in ("str", "word"):
            raise _invalid("filter", self.text, "Invalid list filter expression.")
        value = value_token[1]
        if value_token[0] == "str":
            value = json.loads(value)
        compare = _comparison(path, op[1], value)
        return (lambda item: not compare(item)) if negate else compare


def _comparison(path: str, op: str, value: str) -> Predicate:
    def lookup(item: Mapping[str, Any]) -> Any:
        current: Any = item
        for part in path.split("."):
            if not isinstance(current, Mapping) or part not in current:
                return None
            current = current[part]
        return current

    def text(found: Any) -> str:
        return json.dumps(found) if isinstance(found, bool) else str(found)

    if op == ":":
        if value == "*":
            return lambda item: lookup(item) is not None
        return lambda item: lookup(item) is not None and value in text(lookup(item))
    if op == "=":
        return lambda item: lookup(item) is not None and text(lookup(item)) == value
    return lambda item: lookup(item) is None or text(lookup(item)) != value


# -- small helpers ---------------------------------------------------------------------------------


def _page(
    items: list[dict[str, Any]], token: str, size: int, key: str
) -> tuple[list[dict[str, Any]], str]:
    """One page after `token` (the last key of the previous page, opaque to clients)."""
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except ValueError:
            raise _invalid("pageToken", token, "Invalid page token.") from None
        items = [i for i in items if i[key] > after]
    page = items[:size]
    more = len(items) > size
    next_token = base64.urlsafe_b64encode(page[-1][key].encode()).decode() if more else ""
    return page, next_token


def _scoped(zone: str, page: list[dict[str, Any]]) -> dict[str, Any]:
    """One zone's part of an aggregated page: its instances, or GCE's empty-scope warning."""
    instances = [_without_key(i) for i in page if i["_key"].startswith(f"{zone}/")]
    if instances:
        return {"instances": instances}
    scope = f"zones/{zone}"
    return {
        "warning": {
            "code": "NO_RESULTS_ON_PAGE",
            "message": f"There are no results for scope '{scope}' on this page.",
            "data": [{"key": "scope", "value": scope}],
        }
    }


def _without_key(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "_key"}


def _op_order(op: _Op) -> tuple[datetime, str]:
    return (op.inserted, op.name)


def _base(request: Request) -> str:
    return request.host_url.rstrip("/") + API


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def _fingerprint(data: Any) -> str:
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body), status=status, headers=dict(headers or {}), mimetype="application/json"
    )
