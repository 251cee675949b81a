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

Market: with a market scenario (wmsim/market_sim.py, `use_market` or POST /_sim/market), an
insert beyond the offering's spare capacity or quota ends its Operation with GCE's error
(wmsim/gcp/market.py), running Spot VMs are pre-empted by the market's hazard, and every VM is
billed (GET /_sim/ledger).

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

Signals (wmsim/gcp/signals.py): the Cloud Billing Catalog's Compute Engine SKUs and
regions.advice.capacity, from `signals` (wmsim/signals.py: a market's values when one is
attached with `signals.use_market`, else a static table); POST /_sim/signal-fates
{"operation": "skus.list"|"advice.capacity", "fates": ["forbidden"|"garbage"]} forces faults.

The parts, each in its module of wmsim/gcp: the URL map (`routes`), GCE's REST conventions
(`rest`) and error shape (`errors`), the instances routes and store (`instances`, `vm`), zone
operations (`operations`), networks, subnetworks and images (`catalog_routes` over `catalog`,
which checks insert bodies with `insert_fields`), list filters (`list_filter`), identity tokens
(`identity`), the metadata server (`imds`); SimGce here holds their state and serves them.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map
from werkzeug.wrappers import Request, Response

from wmsim import metadata
from wmsim.behaviour import Behaviour, Faults, Outcome, Preemptions, SimVm
from wmsim.cloud import SimCloudConfig
from wmsim.gcp import imds as imds_gce
from wmsim.gcp.catalog import Catalog
from wmsim.gcp.catalog_routes import CatalogRoutes
from wmsim.gcp.errors import ApiError
from wmsim.gcp.identity import GceIdentity, identity_jwks, project_number
from wmsim.gcp.insert_fields import load_instance_schema
from wmsim.gcp.instances import INSERTS_KEPT, InsertRecord, Instances
from wmsim.gcp.operations import Operation, ZoneOperations
from wmsim.gcp.rest import backend_error, json_response
from wmsim.gcp.routes import rules
from wmsim.gcp.signals import DEFAULT_SIGNAL_TYPES, KIND, SPOT_SHARE, GceSignals
from wmsim.gcp.vm import Vm
from wmsim.market_sim import MarketBound
from wmsim.signals import SignalFates, SignalValues
from wmsim.trust import TrustDir
from wmsim.wsgi import ServerThread

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
WAIT_FOR_CHANGE_MAX_S = 2.0  # a wait_for_change request answers unchanged after this
WAIT_FOR_CHANGE_POLL_S = 0.05

QuotaStyle = Literal["operation", "http"]


@dataclass
class GceState:
    """Everything the simulated cloud holds (`reset` starts a new one)."""

    vms: dict[tuple[str, str, str], Vm] = field(default_factory=dict)  # (project, zone, name)
    # (project, zone, name)
    ops: dict[tuple[str, str, str], Operation] = field(default_factory=dict)
    # (project, requestId)
    request_ids: dict[tuple[str, str], Operation] = field(default_factory=dict)
    zones: set[tuple[str, str]] = field(default_factory=set)  # (project, zone) ever used
    catalog: Catalog = field(default_factory=Catalog)  # networks, subnetworks, images added
    inserts: deque[InsertRecord] = field(default_factory=lambda: deque(maxlen=INSERTS_KEPT))


class SimGce(GceIdentity, Instances, ZoneOperations, CatalogRoutes, GceSignals, MarketBound):
    """A GCE REST server on 127.0.0.1 holding instances and zone operations in memory."""

    market_kind = "gcp"

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
        # What the Billing Catalog and capacity advice serve (wmsim/signals.py).
        self.signals = SignalValues(KIND, SPOT_SHARE, DEFAULT_SIGNAL_TYPES)
        self.signal_fates = SignalFates()
        self.quota_style: QuotaStyle = quota_style
        self.throttle_status = throttle_status  # 403 (GCE's usual) or 429
        self._initial = (self.faults.behaviour.as_dict(), quota_style, throttle_status)
        self._port = port
        self._lock = threading.RLock()
        self._state = GceState()
        self._ids = itertools.count(1)
        self._server: ServerThread | None = None
        self._trust = TrustDir(trust_dir, "wm-sim-gce-")
        self._identity_path: Path | None = None
        self._urls = Map(rules(), strict_slashes=False)
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
            "skus.list": self._skus_list,
            "advice.capacity": self._advice_capacity,
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> SimGce:
        load_instance_schema()
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
            self._market_stopped(str(vm.id))
            if reason == "preempted" and vm.scheduling.get("instanceTerminationAction") == "DELETE":
                # A Spot VM told to DELETE on pre-emption is gone; only the operation remains.
                del self._state.vms[(vm.project, vm.zone, vm.name)]

    def _preempt_due(self) -> None:
        """Pre-empt the Spot VMs whose time has come (Behaviour.preempt_share, and the
        market's reclaims)."""
        self._market_reclaims()
        for vm_id in self.preemptions.due():
            with contextlib.suppress(KeyError):
                self.kill(vm_id, "preempted")

    def remove(self, cloud_id_or_name: str) -> None:
        """The VM vanishes, as if deleted by hand."""
        with self._lock:
            vm = self._find(cloud_id_or_name)
            del self._state.vms[(vm.project, vm.zone, vm.name)]
            self._market_stopped(str(vm.id))

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
            self._state = GceState()
        self.preemptions.clear()
        self.use_market(self.market_initial)
        self.signal_fates.clear()
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
                project_number=project_number(vm.project),
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

    # -- WSGI ------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        self._preempt_due()
        request = Request(environ)
        if (vm := metadata.vm_path(request.path)) is not None:
            return metadata.respond(start_response, self._metadata(request, *vm))
        if request.path.startswith(("/_sim/market", "/_sim/ledger")):
            found = self._market_control(
                request.method, request.path, request.get_json(force=True, silent=True)
            )
            if found is not None:
                return json_response(found[1], found[0])(environ, start_response)
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
                raise backend_error()
            response = self._handlers[operation](request, **args)
        except ApiError as error:
            response = error.response()
        except Exception:  # a bug in the simulation: answer like GCE, keep the trace visible
            response = ApiError(500, "backendError", traceback.format_exc(limit=3)).response()
        if outcome is Outcome.LOST:  # carried out; the client never hears of it
            self.faults.hold_lost_answer()
            response = backend_error().response()
        return response

    def _throttle_error(self) -> ApiError:
        retry_after = self.faults.behaviour.retry_after_s
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after else {}
        if self.throttle_status == 429:
            return ApiError(429, "rateLimitExceeded", "Too Many Requests", headers=headers)
        return ApiError(
            403, "rateLimitExceeded", "Rate Limit Exceeded", domain="usageLimits", headers=headers
        )

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
                        return json_response({"error": "audience is required"}, 400)
                    token = self.identity_token(args["zone"], args["name"], audience)
                    return json_response({"token": token})
                case "sim.jwks":
                    return json_response(identity_jwks())
                case "sim.requests":
                    return json_response(self.faults.counts())
                case "sim.signal-fates":
                    self.signal_fates.force(str(body["operation"]), *body["fates"])
                case "sim.requests.reset":
                    self.faults.reset_counts()
                case "sim.behaviour":
                    self.faults.behaviour.update(**body)
                    return json_response(self.faults.behaviour.as_dict())
                case "sim.instances":
                    return json_response(
                        [asdict(vm) | {"tags": dict(vm.tags)} for vm in self.instances()]
                    )
                case "sim.kill":
                    self.kill(str(body["id"]), str(body.get("reason", "preempted")))
                case "sim.remove":
                    self.remove(str(body["id"]))
                case "sim.reset":
                    self.reset()
                case "sim.creates":
                    return json_response([asdict(record) for record in self.inserts()])
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
            return json_response({"error": f"no such instance or field: {exc}"}, 404)
        except (TypeError, ValueError) as exc:
            return json_response({"error": str(exc)}, 400)
        return json_response({"ok": True})


def serve(config: SimCloudConfig, state_dir: Path) -> SimGce:
    """Start the simulated GCE for `wmsim serve` (plain http); the JWKS of its identity tokens
    goes into state_dir."""
    sim = SimGce(Behaviour.from_config(config), port=config.port, trust_dir=state_dir).start()
    _ = sim.identity_trust_path  # written now, so a config can name it before any worker boots
    return sim
