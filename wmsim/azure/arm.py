"""A simulated Azure Resource Manager (and the Entra ID token endpoints) over HTTPS.

It speaks enough of ARM's wire protocol for the real azure-mgmt-compute / azure-mgmt-network
SDKs and azure-identity's ClientSecretCredential: VMs with inline NIC and public IP
configurations, standalone NICs, public IPs and disks, paged lists with `nextLink`, async
operations (`Azure-AsyncOperation`), ARM's error bodies, throttling and quota answers.

Real-ARM behaviour copied on purpose, because the adapter depends on it:
- `deleteOption` defaults to Detach for the OS disk, NICs and public IPs; only resources marked
  Delete go with their VM.
- A second PUT of a VM is an update, never a duplicate; changing `osProfile` (e.g. a new admin
  password) is refused with 409 PropertyChangeNotAllowed.
- `statusOnly=true` lists carry the instance view but no tags and no model properties
  (azure-sdk-for-go#18565: tags come back nil with StatusOnly).
- A NIC attached to a VM cannot be deleted (400 NicInUse), nor a public IP attached to a NIC
  (400 PublicIPAddressCannotBeDeleted).
- Spot eviction shows no status code of its own: a Deallocate-policy VM just turns
  `PowerState/deallocated`, a Delete-policy VM disappears with what it would delete.
- A DELETE of a resource that does not exist answers 204, ARM's contract; some resource
  providers (and every resource of a resource group deleted by hand) answer 404 instead:
  `delete_missing_status = 404` makes the sim do that.

What a VM PUT may name must exist, as on ARM (moto's habit for EC2): refusals come in ARM's
shape and codes (an unknown subnet 400 InvalidResourceReference, an unknown marketplace image
404 PlatformImageNotFound, an unknown image id 404 NotFound / GalleryImageNotFound, an unknown
VM size, a missing OS disk or a bad priority / eviction policy / billing profile 400
InvalidParameter). Known are:
- virtual networks: every resource group of every subscription holds `wm-vnet` with the subnet
  `workers` (a default network, like EC2's default VPC; `default_subnet_id` in
  launch_configs.py); more through azure-mgmt-network's `virtual_networks` /
  `subnets.begin_create_or_update`;
- marketplace images of the common publishers (`MARKETPLACE_IMAGES` in vm_rules.py, any
  version); images by id once registered (`register_image`, POST /_sim/images {"id"}, or PUT
  of a Microsoft.Compute/images resource);
- the VM sizes in `VM_SIZES` (vm_rules.py).
`preload` holds a VM without these checks (VMs made before the test, by hand or in bulk).

Every VM PUT the sim handles is recorded, body verbatim (secrets included: it is a test
double) with its answer: `vm_puts()` in process, GET /_sim/vm-puts over HTTP. Tests compare
what reached the cloud with the launch config they started from. `example_launch_config`
(launch_configs.py) builds a Taskcluster launch config (resource form) the sim accepts as it
is.

Deployments, template specs and resource groups (Microsoft.Resources) live in
wmsim/azure/deployments.py (`sim.deployments`): a deployed VM, NIC, public IP or disk is made
by this module's own code, so it is a resource like any other here.

Metadata: every VM's IMDS is served at /_vm/<VM name>/metadata/... (see wmsim/metadata.py for
the addressing and wmsim/azure/imds.py for the paths): /metadata/instance with the tags it was
created with in compute.tagsList, /metadata/attested/document (nonce optional), and
/metadata/scheduledevents with a Preempt event from the Spot eviction notice on.

Identity (older tests): GET /_sim/attested/<vm name>[?nonce=...] answers {"document"}:
the VM's attested data (IMDS's "signature" field, PKCS#7 signed by a simulated
metadata.azure.com leaf under a simulated Microsoft root, see wmsim/azure/attested.py).
`identity_trust_path` is the root's and issuing CA's PEM (the config's `identity_roots`);
`mint_attested` makes forgeries for tests.

Market: with a market scenario (wmsim/market_sim.py, `use_market` or POST /_sim/market), a VM
PUT (alone or in a deployment) beyond the offering's spare capacity or quota is refused or fails
its provisioning as Azure does (wmsim/azure/market.py), running Spot VMs are evicted by the
market's hazard, and every VM is billed (GET /_sim/ledger).

Signals (wmsim/azure/signals.py): Retail Prices at /api/retail/prices (no token, as on
prices.azure.com) and Resource Graph's SpotResources eviction rates, from `signals`
(wmsim/signals.py: a market's values when one is attached with `signals.use_market`, else a
static table); POST /_sim/signal-fates {"operation": "RetailPrices_List"|"Resources_Query",
"fates": ["forbidden"|"garbage"]} forces faults.

This module holds the SimArm's lifecycle, test accessors and request path (faults,
throttling, authentication, dispatch); its parts are mixins of one job each, listed in
arm_state.py. Launch configs the sim accepts are launch_configs.py's.
"""

from __future__ import annotations

import collections
import contextlib
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from werkzeug.wrappers import Request, Response

from wmsim import metadata
from wmsim.azure import entra
from wmsim.azure.arm_routes import ArmRoutes
from wmsim.azure.attached import AttachedResources
from wmsim.azure.control import Control
from wmsim.azure.deployments import ArmDeployments
from wmsim.azure.errors import ArmError, error_answer, server_error
from wmsim.azure.images import Images
from wmsim.azure.networks import Networks
from wmsim.azure.operations import Operation, Operations
from wmsim.azure.resources import RecordedPut, _json, _key, _Resource, _Vm, _Vnet
from wmsim.azure.signals import (
    DEFAULT_SIGNAL_TYPES,
    KIND,
    RESOURCE_GRAPH,
    RETAIL_PRICES,
    SPOT_SHARE,
    ArmSignals,
)
from wmsim.azure.tls import make_certificate
from wmsim.azure.vm_metadata import VmMetadata
from wmsim.azure.vm_views import sim_vm
from wmsim.azure.vms import VM_PUTS_KEPT, VirtualMachines
from wmsim.behaviour import Behaviour, Faults, Outcome, Preemptions, SimVm
from wmsim.cloud import SimCloudConfig
from wmsim.market_sim import MarketBound
from wmsim.signals import SignalFates, SignalValues
from wmsim.trust import TrustDir
from wmsim.wsgi import ServerThread

DELETE_MISSING_STATUS = 204  # what a DELETE of a missing resource answers (ARM's contract)
# Creates journalled with their idempotency key (the name) -> VMs each takes from the
# create-rate bucket.
KEYED_CREATES = {"VirtualMachines_CreateOrUpdate": 1, "Deployments_CreateOrUpdate": 0}


class SimArm(
    ArmRoutes,
    VirtualMachines,
    AttachedResources,
    Networks,
    Images,
    Operations,
    VmMetadata,
    Control,
    MarketBound,
    ArmSignals,
):
    """The simulated ARM endpoint. `endpoint` is the provider config's endpoint and authority."""

    market_kind = "azure"

    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        port: int = 0,
        cert_dir: Path | None = None,
        seed: int | None = None,
    ) -> None:
        self.faults = Faults(behaviour, seed=seed)
        self.preemptions = Preemptions(self.faults)
        # What Retail Prices and Resource Graph's SpotResources serve (wmsim/signals.py).
        self.signals = SignalValues(KIND, SPOT_SHARE, DEFAULT_SIGNAL_TYPES)
        self.signal_fates = SignalFates()
        self._initial = Behaviour(**self.faults.behaviour.as_dict())
        self.delete_missing_status = DELETE_MISSING_STATUS  # or 404: see the module docstring
        self._port = port
        self._cert_dir = cert_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.RLock()
        self._vms: dict[str, _Vm] = {}
        self._resources: dict[str, _Resource] = {}
        self._operations: dict[str, Operation] = {}
        self._vnets: dict[str, _Vnet] = {}  # created ones; the default network is implied
        self._images: dict[str, dict[str, Any]] = {}  # lower-case id -> model
        self._vm_puts: collections.deque[RecordedPut] = collections.deque(maxlen=VM_PUTS_KEPT)
        self._server: ServerThread | None = None
        # Microsoft.Resources: deployments, template specs, resource groups.
        self.deployments = ArmDeployments(self, seed=seed)
        self._trust = TrustDir(cert_dir, "wm-sim-arm-identity-")
        self._identity_path: Path | None = None
        self.cert_path: Path | None = None
        self.endpoint = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> SimArm:
        if self._cert_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="wm-sim-arm-")
            self._cert_dir = Path(self._tmp.name)
        self.cert_path, key_path = make_certificate(self._cert_dir)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_path, key_path)
        self._server = ServerThread(self._wsgi, port=self._port, ssl_context=context).start()
        self.endpoint = self._server.base_url
        return self

    def stop(self) -> None:
        self.faults.cut_hangs()
        if self._server:
            self._server.stop()
            self._server = None
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None
        with self._lock:
            self._identity_path = None
        self._trust.cleanup()

    def reset(self) -> None:
        """Forget every resource, network, image and count; behaviour goes back to what the
        sim started with."""
        self.faults.cut_hangs()
        self.delete_missing_status = DELETE_MISSING_STATUS
        with self._lock:
            self._vms.clear()
            self._resources.clear()
            self._operations.clear()
            self._vnets.clear()
            self._images.clear()
            self._vm_puts.clear()
            self.deployments.reset()
        self.preemptions.clear()
        self.use_market(self.market_initial)
        self.signal_fates.clear()
        self.faults.reset_counts()
        self.faults.behaviour.update(**self._initial.as_dict())

    # -- what tests and leak checks see ------------------------------------------------------

    def instances(self) -> list[SimVm]:
        self._preempt_due()
        with self._lock:
            self._sweep()
            return [sim_vm(vm) for vm in self._vms.values()]

    def resources(self) -> list[str]:
        """Ids of every resource held: VMs, NICs, public IPs and disks."""
        with self._lock:
            self._sweep()
            return [vm.id for vm in self._vms.values()] + [r.id for r in self._resources.values()]

    def kill(self, cloud_id_or_name: str, reason: str = "preempted") -> None:
        """The VM dies out of band: a Spot VM is evicted by its policy, others are stopped."""
        with self._lock:
            vm = self._find(cloud_id_or_name)
            vm.reason = reason
            self._market_stopped(_key(vm.id))
            policy = str(vm.properties.get("evictionPolicy", "Deallocate")).lower()
            if vm.spot and policy == "delete":
                self._drop_vm(_key(vm.id))
            else:
                vm.power = "deallocated" if vm.spot else "stopped"

    def _preempt_due(self) -> None:
        """Evict the Spot VMs whose time has come (Behaviour.preempt_share, and the market's
        reclaims)."""
        self._market_reclaims()
        for vm_id in self.preemptions.due():
            with contextlib.suppress(KeyError):
                self.kill(vm_id, "evicted")

    def fail(
        self,
        cloud_id_or_name: str,
        code: str = "AllocationFailed",
        message: str = "Allocation failed. We do not have sufficient capacity for the requested "
        "VM size in this region.",
    ) -> None:
        """The VM's provisioning fails (shown as ProvisioningState/failed/<code>)."""
        with self._lock:
            self._find(cloud_id_or_name).failure = (code, message)

    def remove(self, cloud_id_or_name: str) -> None:
        """The VM vanishes as if deleted by hand (its Delete-option resources go with it)."""
        with self._lock:
            self._drop_vm(_key(self._find(cloud_id_or_name).id))

    def remove_resource(self, name: str) -> None:
        """A NIC, public IP or disk vanishes as if deleted by hand (attached or not)."""
        with self._lock:
            for key, resource in list(self._resources.items()):
                if resource.id.rsplit("/", 1)[1].lower() == name.lower():
                    self._drop_resource(key)
                    return
        raise KeyError(name)

    def user_data(self, cloud_id_or_name: str) -> str | None:
        with self._lock:
            return self._find(cloud_id_or_name).user_data

    def custom_data(self, cloud_id_or_name: str) -> str | None:
        """The VM's osProfile.customData (base64), as the VM would find it on its disk."""
        with self._lock:
            return self._find(cloud_id_or_name).custom_data

    def _find(self, cloud_id_or_name: str) -> _Vm:
        self._sweep()
        wanted = cloud_id_or_name.lower()
        for key, vm in self._vms.items():
            if wanted in (key, vm.name.lower(), vm.vm_id):
                return vm
        raise KeyError(cloud_id_or_name)

    # -- WSGI --------------------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        self._preempt_due()
        request = Request(environ)
        try:
            response = self._dispatch(request)
        except ArmError as error:
            response = error_answer(error)
        except Exception as exc:  # a sim bug must still answer in ARM's shape
            response = error_answer(ArmError(500, "InternalServerError", f"sim error: {exc!r}"))
        response.headers.setdefault("x-ms-request-id", str(uuid.uuid4()))
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        if (vm := metadata.vm_path(request.path)) is not None:
            return self._metadata(request, *vm)
        parts = [unquote(p) for p in request.path.split("/") if p]
        lower = [p.lower() for p in parts]
        if lower[:1] == ["_sim"]:
            found = self._market_control(
                request.method, "/" + "/".join(lower), request.get_json(silent=True)
            )
            if found is not None:
                return _json(found[1], found[0])
            return self._control(request, lower[1:])
        if len(lower) == 4 and lower[1:] == ["v2.0", ".well-known", "openid-configuration"]:
            return entra.openid_configuration(self.endpoint, parts[0])
        if len(lower) == 4 and lower[1:] == ["oauth2", "v2.0", "token"]:
            return entra.token(request)
        if lower == ["api", "retail", "prices"]:  # prices.azure.com's: public, no token
            self._signal_before(RETAIL_PRICES, request, token=False)
            return self._retail_prices(request)
        if lower == ["providers", "microsoft.resourcegraph", "resources"]:
            self._signal_before(RESOURCE_GRAPH, request, token=True)
            return self._resource_graph(request)
        if lower[:1] != ["subscriptions"] or len(parts) < 2:
            raise ArmError(404, "InvalidResourceType", f"no route for {request.path}")
        route = self._route(request.method, parts, lower)
        if route is None:
            raise ArmError(
                404, "InvalidResourceType", f"no route for {request.method} {request.path}"
            )
        operation, handler = route
        outcome = self._before(operation, request)  # outside the lock: latency must not serialize
        if outcome is not Outcome.LOST:
            return self._handle(request, handler)
        # Carried out, whatever it answered; the client never hears of it.
        with contextlib.suppress(ArmError):
            self._handle(request, handler)
        self.faults.hold_lost_answer()
        raise server_error(request)

    def _handle(self, request: Request, handler: Callable[[], Response]) -> Response:
        with self._lock:
            self._request = request
            self._sweep()
            return handler()

    def _signal_before(self, operation: str, request: Request, *, token: bool) -> None:
        """A signal request counted, delayed and maybe faulted as any other; Retail Prices
        asks for no token or api-version."""
        if token:
            self._before(operation, request)
            return
        outcome = self.faults.before(operation)
        if outcome == Outcome.THROTTLE:
            raise ArmError(429, "TooManyRequests", "Too many requests. Please retry later.")
        if outcome == Outcome.FAIL:
            raise server_error(request)

    def _before(self, operation: str, request: Request) -> Outcome:
        """Count, delay and maybe fault the request; then check the basics ARM checks.
        Returns OK, or LOST for a request to carry out whose answer is then lost."""
        if operation in KEYED_CREATES:
            outcome = self.faults.before(
                operation,
                # the VM's or deployment's name: ARM's idempotency
                key=request.path.rsplit("/", 1)[1].lower(),
                params=request.get_json(silent=True),
                vms=KEYED_CREATES[operation],
            )
        else:
            outcome = self.faults.before(operation)
        behaviour = self.faults.behaviour
        if outcome == Outcome.THROTTLE:
            headers = {"x-ms-ratelimit-remaining-subscription-reads": "0"}
            if behaviour.retry_after_s is not None:
                headers["Retry-After"] = f"{behaviour.retry_after_s:g}"
            raise ArmError(
                429,
                "TooManyRequests",
                "The request is being throttled as the limit has been reached for operation "
                f"type {operation}.",
                **headers,
            )
        if outcome == Outcome.FAIL:
            raise server_error(request)
        auth = request.headers.get("Authorization", "")
        if not auth.startswith(f"Bearer {entra.TOKEN_PREFIX}"):
            raise ArmError(
                401,
                "AuthenticationFailed" if not auth else "InvalidAuthenticationToken",
                "Authentication failed. The 'Authorization' header is missing or invalid.",
            )
        if not request.args.get("api-version"):
            raise ArmError(
                400,
                "MissingApiVersionParameter",
                "The api-version query parameter (?api-version=) is required for all requests.",
            )
        return outcome

    # -- deletion and cascades ---------------------------------------------------------------

    def _sweep(self) -> None:
        """Drop VMs whose delete finished, with what they delete; move deployments on."""
        now = time.time()
        for key, vm in list(self._vms.items()):
            if vm.deleted_at is not None and now >= vm.deleted_at + vm.delete_s:
                self._drop_vm(key)
        self.deployments.advance(now)


def serve(config: SimCloudConfig, state_dir: Path) -> SimArm:
    """Start the simulated ARM for `wmsim serve`; its TLS certificate and the root of its
    attested data go into state_dir."""
    sim = SimArm(Behaviour.from_config(config), port=config.port, cert_dir=state_dir).start()
    _ = sim.identity_trust_path  # written now, so a config can name it before any worker boots
    return sim
