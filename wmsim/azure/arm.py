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
  `workers` (a default network, like EC2's default VPC; `default_subnet_id`); more through
  azure-mgmt-network's `virtual_networks` / `subnets.begin_create_or_update`;
- marketplace images of the common publishers (`MARKETPLACE_IMAGES`, any version); images by
  id once registered (`register_image`, POST /_sim/images {"id"}, or PUT of a
  Microsoft.Compute/images resource);
- the VM sizes in `VM_SIZES`.
`preload` holds a VM without these checks (VMs made before the test, by hand or in bulk).

Every VM PUT the sim handles is recorded, body verbatim (secrets included: it is a test
double) with its answer: `vm_puts()` in process, GET /_sim/vm-puts over HTTP. Tests compare
what reached the cloud with the launch config they started from. `example_launch_config`
builds a Taskcluster launch config (resource form) the sim accepts as it is.

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
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import hashlib
import ipaddress
import json
import secrets
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from werkzeug.wrappers import Request, Response

from wm.pools.config_tables import SPOT_AZURE
from wmsim import metadata
from wmsim.azure import attested
from wmsim.azure import imds as imds_azure
from wmsim.azure.deployments import ArmDeployments
from wmsim.azure.resources import (
    COMPUTE,
    DEFAULT_RESOURCE_GROUP,
    DISK_TYPE,
    IMAGE_TYPE,
    IP_TYPE,
    NETWORK,
    NIC_TYPE,
    SUBNET_TYPE,
    VM_TYPE,
    VNET_TYPE,
    ArmError,
    RecordedPut,
    _child_view,
    _json,
    _key,
    _now_iso,
    _Resource,
    _Vm,
    _Vnet,
)
from wmsim.behaviour import Behaviour, Faults, Outcome, Preemptions, SimVm, lifecycle_state
from wmsim.cloud import SimCloudConfig
from wmsim.launch_configs import worker_manager
from wmsim.trust import TrustDir
from wmsim.wsgi import ServerThread

# ARM chooses VM list page sizes itself (no $top on VM lists); the sim uses this unless
# behaviour.page_size_max is smaller.
DEFAULT_PAGE_SIZE = 1000
TOKEN_PREFIX = "sim-arm."  # any bearer token with this prefix is accepted, across restarts
TOKEN_LIFETIME_S = 3599
DELETE_MISSING_STATUS = 204  # what a DELETE of a missing resource answers (ARM's contract)
CERT_VALIDITY_DAYS = 3650
IDENTITY_TRUST_FILE = "arm-identity-root.pem"
# The default network every resource group holds (the subnet launch configs use unless a test
# creates its own), and where example launch configs put it: the demo's provider.
DEFAULT_VNET = "wm-vnet"
DEFAULT_SUBNET = "workers"
DEFAULT_VNET_PREFIX = "10.0.0.0/16"
DEFAULT_SUBNET_PREFIX = "10.0.0.0/24"
DEFAULT_SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"
DEFAULT_IMAGE = "Canonical:ubuntu-24_04-lts:server:latest"
# Marketplace images (publisher, offer, sku), lower case as ARM compares them; any version.
MARKETPLACE_IMAGES = frozenset(
    {
        ("canonical", "ubuntu-24_04-lts", "server"),
        ("canonical", "ubuntu-24_04-lts", "server-gen1"),
        ("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts"),
        ("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"),
        ("canonical", "0001-com-ubuntu-server-focal", "20_04-lts-gen2"),
        ("canonical", "ubuntuserver", "18.04-lts"),
        ("debian", "debian-12", "12"),
        ("debian", "debian-12", "12-gen2"),
        ("microsoftwindowsserver", "windowsserver", "2019-datacenter"),
        ("microsoftwindowsserver", "windowsserver", "2022-datacenter"),
        ("microsoftwindowsserver", "windowsserver", "2022-datacenter-azure-edition"),
        ("microsoftwindowsserver", "windowsserver", "2025-datacenter-azure-edition"),
        ("microsoftwindowsdesktop", "windows-11", "win11-23h2-pro"),
    }
)
# VM sizes the sim offers in every location: name -> (vCPUs, memory GiB), Azure's published
# figures. Besides the demo's and the tests' own, every size the two public Taskcluster
# deployments' Azure pools name (tests/fixtures/real_pools: vmSize of each ARM launch config).
VM_SIZE_SPECS: Mapping[str, tuple[int, float]] = {
    "Basic_A1": (1, 1.75),
    "Standard_A1_v2": (1, 2),
    "Standard_A2_v2": (2, 4),
    "Standard_B1s": (1, 1),
    "Standard_B2s": (2, 4),
    "Standard_B2ms": (2, 8),
    "Standard_D2s_v3": (2, 8),
    "Standard_D4s_v3": (4, 16),
    "Standard_D8s_v3": (8, 32),
    "Standard_D16s_v3": (16, 64),
    "Standard_D2s_v5": (2, 8),
    "Standard_D4s_v5": (4, 16),
    "Standard_D8s_v5": (8, 32),
    "Standard_D16s_v5": (16, 64),
    "Standard_D32s_v5": (32, 128),
    "Standard_D2as_v5": (2, 8),
    "Standard_D4as_v5": (4, 16),
    "Standard_D8ads_v5": (8, 32),
    "Standard_D32ads_v5": (32, 128),
    "Standard_D96ads_v5": (96, 384),
    "Standard_D2ds_v5": (2, 8),
    "Standard_D4ds_v5": (4, 16),
    "Standard_D8pds_v5": (8, 32),  # Arm64 (Ampere Altra)
    "Standard_D16pds_v5": (16, 64),
    "Standard_E8ads_v5": (8, 64),
    "Standard_F2s_v2": (2, 4),
    "Standard_F4s_v2": (4, 8),
    "Standard_F8s_v2": (8, 16),
    "Standard_F16s_v2": (16, 32),
    "Standard_F32s_v2": (32, 64),
    "Standard_NC4as_T4_v3": (4, 28),
    "Standard_NC6s_v3": (6, 112),
    "Standard_NV12s_v3": (12, 112),  # one Tesla M60
    "Standard_NV12ads_A10_v5": (12, 110),  # a third of an A10
}
VM_SIZE_NAMES = tuple(VM_SIZE_SPECS)
VM_SIZES = frozenset(size.lower() for size in VM_SIZE_NAMES)
PRIORITIES = frozenset({"regular", "low", "spot"})
EVICTION_POLICIES = frozenset({"deallocate", "delete"})
DISK_CREATE_OPTIONS = frozenset({"fromimage", "empty", "attach", "copy", "restore"})
# VM resource fields that live beside `properties`, kept and echoed.
VM_RESOURCE_FIELDS = ("plan", "identity", "zones", "extendedLocation", "placement")
VM_PUTS_KEPT = 10_000  # the record of VM PUT bodies keeps the latest this many
# Creates journalled with their idempotency key (the name) -> VMs each takes from the
# create-rate bucket.
KEYED_CREATES = {"VirtualMachines_CreateOrUpdate": 1, "Deployments_CreateOrUpdate": 0}
# (provider namespace, resource type segment) -> canonical type and the operation-id prefix.
CHILD_KINDS = {
    (NETWORK, "networkinterfaces"): (NIC_TYPE, "NetworkInterfaces"),
    (NETWORK, "publicipaddresses"): (IP_TYPE, "PublicIPAddresses"),
    (COMPUTE, "disks"): (DISK_TYPE, "Disks"),
}


def _invalid(message: str, target: str) -> ArmError:
    return ArmError(400, "InvalidParameter", message, target=target)


def _missing(parameter: str) -> ArmError:
    return _invalid(f"Required parameter '{parameter}' is missing (null).", parameter)


@dataclass
class _Operation:
    id: str
    target: str  # resource key
    kind: str  # create | delete | done


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost; returns (cert, key) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CERT_VALIDITY_DAYS))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "arm-cert.pem", directory / "arm-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


class SimArm:
    """The simulated ARM endpoint. `endpoint` is the provider config's endpoint and authority."""

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
        self._initial = Behaviour(**self.faults.behaviour.as_dict())
        self.delete_missing_status = DELETE_MISSING_STATUS  # or 404: see the module docstring
        self._port = port
        self._cert_dir = cert_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.RLock()
        self._vms: dict[str, _Vm] = {}
        self._resources: dict[str, _Resource] = {}
        self._operations: dict[str, _Operation] = {}
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
        self.faults.reset_counts()
        self.faults.behaviour.update(**self._initial.as_dict())

    # -- what tests and leak checks see ------------------------------------------------------

    def instances(self) -> list[SimVm]:
        self._preempt_due()
        with self._lock:
            self._sweep()
            return [self._sim_vm(vm) for vm in self._vms.values()]

    def vm_puts(self, name: str | None = None) -> list[RecordedPut]:
        """The VM PUTs handled, oldest first; only those of the VM `name` if given."""
        with self._lock:
            puts = list(self._vm_puts)
        if name is None:
            return puts
        return [put for put in puts if put.name.lower() == name.lower()]

    def register_image(self, image_id: str, location: str = "eastus") -> None:
        """An image VMs may name by id: a managed image, a gallery image definition or
        version, a shared or community gallery image id."""
        with self._lock:
            self._images[_key(image_id.rstrip("/"))] = _image_model(image_id, location, {})

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
            policy = str(vm.properties.get("evictionPolicy", "Deallocate")).lower()
            if vm.spot and policy == "delete":
                self._drop_vm(_key(vm.id))
            else:
                vm.power = "deallocated" if vm.spot else "stopped"

    def _preempt_due(self) -> None:
        """Evict the Spot VMs whose time has come (Behaviour.preempt_share)."""
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

    # -- attested data -----------------------------------------------------------------------

    @property
    def identity_trust_path(self) -> Path:
        """PEM of the simulated Microsoft root that attested data chains to, and of the issuing
        CA that signs it (documents carry the leaf alone, as genuine ones do)."""
        with self._lock:
            if self._identity_path is None:
                path = self._trust.path(IDENTITY_TRUST_FILE)
                path.write_bytes(attested.trust_pem())
                self._identity_path = path
            return self._identity_path

    def attested_document(self, cloud_id_or_name: str, nonce: str | None = None) -> dict[str, str]:
        """What the VM's worker-runner posts to register: {"document"} (it asks for no nonce)."""
        return self.mint_attested(cloud_id_or_name, nonce)

    def mint_attested(
        self,
        cloud_id_or_name: str,
        nonce: str | None = None,
        *,
        changes: Mapping[str, Any] | None = None,
        signer: attested.Signer | None = None,
        created_on: dt.datetime | None = None,
        lifetime_s: float = attested.DOCUMENT_LIFETIME_S,
        signed_attributes: bool = False,
        detached: bool = False,
    ) -> dict[str, str]:
        """Attested data of the VM with `changes` to its content, another `signer`, other
        times, signed attributes or a detached signature: forgeries for tests."""
        with self._lock:
            vm = self._find(cloud_id_or_name)
            if vm.deleted_at is not None or vm.power or vm.failure:
                raise KeyError(f"VM {cloud_id_or_name!r} is not running: no metadata service")
            vm_id, subscription = vm.vm_id, vm.id.split("/")[2]
        content = attested.attested_content(
            # Like IMDS: without a nonce, the current time stands in for one.
            nonce=nonce or str(int(time.time())),
            vm_id=vm_id,
            subscription_id=subscription,
            created_on=created_on,
            lifetime_s=lifetime_s,
        )
        content.update(changes or {})
        document = attested.sign_attested(
            content, signer, signed_attributes=signed_attributes, detached=detached
        )
        return {"document": document}

    # -- per-VM metadata service -------------------------------------------------------------

    def metadata_view(self, key: str) -> imds_azure.AzureVmView:
        """What the VM's IMDS serves; KeyError when it has none (unknown, booting, stopped,
        failed or being deleted)."""
        with self._lock:
            vm = self._find(key)
            if self._phase(vm) != "running" or vm.power or vm.failure:
                raise KeyError(key)
            parts = vm.id.split("/")
            os_profile = vm.properties.get("osProfile") or {}
            return imds_azure.AzureVmView(
                name=vm.name,
                resource_id=vm.id,
                subscription_id=parts[2],
                resource_group=parts[4],
                location=vm.location,
                vm_id=vm.vm_id,
                vm_size=str((vm.properties.get("hardwareProfile") or {}).get("vmSize", "")),
                priority="Spot" if vm.spot else "Regular",
                tags=dict(vm.tags),
                user_data=vm.user_data or "",
                os_profile={
                    "adminUsername": os_profile.get("adminUsername", ""),
                    "computerName": os_profile.get("computerName", vm.name),
                    "disablePasswordAuthentication": "false",
                },
                addresses=self._addresses(vm),
                eviction_at=metadata.announced(
                    self.preemptions.due_at(vm.id), imds_azure.EVICTION_NOTICE_S
                ),
                attested=lambda nonce, name=vm.name: self.attested_document(
                    name, nonce or time.strftime("%Y%m%d-%H%M%S", time.gmtime())
                )["document"],
            )

    def _addresses(self, vm: _Vm) -> tuple[tuple[str, str], ...]:
        out = []
        for ref in (vm.properties.get("networkProfile") or {}).get("networkInterfaces") or []:
            nic = self._resources.get(_key(str(ref.get("id", ""))))
            configs = (nic.properties.get("ipConfigurations") or []) if nic else []
            if not configs:
                continue
            props = configs[0].get("properties") or {}
            ip = self._resources.get(_key(str((props.get("publicIPAddress") or {}).get("id", ""))))
            public = str(ip.properties.get("ipAddress", "")) if ip else ""
            out.append((str(props.get("privateIPAddress", "")), public))
        return tuple(out)

    def _metadata(self, request: Request, key: str, path: str) -> Response:
        try:
            view = self.metadata_view(key)
        except KeyError:
            return _json({"error": "Not found"}, 404)
        headers = {k.lower(): v for k, v in request.headers.items()}
        found = imds_azure.answer(view, request.method, path, dict(request.args), headers)
        return Response(found.body, status=found.status, content_type=found.content_type)

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
            response = _error(error)
        except Exception as exc:  # a sim bug must still answer in ARM's shape
            response = _error(ArmError(500, "InternalServerError", f"sim error: {exc!r}"))
        response.headers.setdefault("x-ms-request-id", str(uuid.uuid4()))
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        if (vm := metadata.vm_path(request.path)) is not None:
            return self._metadata(request, *vm)
        parts = [unquote(p) for p in request.path.split("/") if p]
        lower = [p.lower() for p in parts]
        if lower[:1] == ["_sim"]:
            return self._control(request, lower[1:])
        if len(lower) == 4 and lower[1:] == ["v2.0", ".well-known", "openid-configuration"]:
            return self._openid(parts[0])
        if len(lower) == 4 and lower[1:] == ["oauth2", "v2.0", "token"]:
            return self._token(request)
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
        raise _server_error(request)

    def _handle(self, request: Request, handler: Callable[[], Response]) -> Response:
        with self._lock:
            self._request = request
            self._sweep()
            return handler()

    def _route(
        self, method: str, parts: list[str], lower: list[str]
    ) -> tuple[str, Callable[[], Response]] | None:
        if (found := self.deployments.route(method, parts, lower)) is not None:
            return found
        sub = parts[1]
        rest, rest_lower = parts[2:], lower[2:]
        # /subscriptions/{sub}/providers/{ns}/...
        if rest_lower[:1] == ["providers"] and len(rest) >= 3:
            ns, kind = rest_lower[1], rest_lower[2]
            if (ns, kind) == (COMPUTE, "virtualmachines") and len(rest) == 3 and method == "GET":
                return "VirtualMachines_ListAll", lambda: self._list_vms(sub, None, None)
            if kind == "locations" and len(rest) == 6 and rest_lower[4] == "operations":
                return "Operations_Get", lambda: self._operation(rest[5])
            if (
                ns == COMPUTE
                and kind == "locations"
                and len(rest) == 5
                and rest_lower[4] == "virtualmachines"
            ):
                return "VirtualMachines_ListByLocation", lambda: self._list_vms(
                    sub, None, rest[3].lower()
                )
            return None
        # /subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}[/{name}[/instanceView]]
        if rest_lower[:1] != ["resourcegroups"] or len(rest) < 5 or rest_lower[2] != "providers":
            return None
        rg, ns, kind, tail = rest[1], rest_lower[3], rest_lower[4], rest[5:]
        if (ns, kind) == (COMPUTE, "virtualmachines"):
            return self._vm_route(method, sub, rg, tail)
        if (ns, kind) == (NETWORK, "virtualnetworks"):
            return self._vnet_route(method, sub, rg, tail)
        if (ns, kind) == (COMPUTE, "images") and len(tail) == 1:
            rid = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{IMAGE_TYPE}/{tail[0]}"
            if method == "PUT":
                return "Images_CreateOrUpdate", lambda: self._put_image(rid)
            if method == "GET":
                return "Images_Get", lambda: self._get_image(rid)
        if (ns, kind) in CHILD_KINDS:
            rtype, prefix = CHILD_KINDS[(ns, kind)]
            if not tail and method == "GET":
                name = "ListByResourceGroup" if rtype == DISK_TYPE else "List"
                return f"{prefix}_{name}", lambda: self._list_children(sub, rg, rtype)
            if len(tail) != 1:
                return None
            rid = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{rtype}/{tail[0]}"
            if method == "GET":
                return f"{prefix}_Get", lambda: self._get_child(rid)
            if method == "DELETE":
                return f"{prefix}_Delete", lambda: self._delete_child(rid)
            if method == "PUT" and rtype != DISK_TYPE:
                return f"{prefix}_CreateOrUpdate", lambda: self._put_child(rid, rtype)
        return None

    def _vm_route(
        self, method: str, sub: str, rg: str, tail: list[str]
    ) -> tuple[str, Callable[[], Response]] | None:
        if not tail:
            return (
                ("VirtualMachines_List", lambda: self._list_vms(sub, rg, None))
                if (method == "GET")
                else None
            )
        rid = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{VM_TYPE}/{tail[0]}"
        if len(tail) == 2 and tail[1].lower() == "instanceview" and method == "GET":
            return "VirtualMachines_InstanceView", lambda: self._instance_view(rid)
        if len(tail) != 1:
            return None
        handlers = {
            "GET": ("VirtualMachines_Get", lambda: self._get_vm(rid)),
            "PUT": ("VirtualMachines_CreateOrUpdate", lambda: self._put_vm(rid)),
            "DELETE": ("VirtualMachines_Delete", lambda: self._delete_vm(rid)),
        }
        return handlers.get(method)

    def _vnet_route(
        self, method: str, sub: str, rg: str, tail: list[str]
    ) -> tuple[str, Callable[[], Response]] | None:
        group = f"/subscriptions/{sub}/resourceGroups/{rg}"
        if not tail:
            if method == "GET":
                return "VirtualNetworks_List", lambda: self._list_vnets(group)
            return None
        vnet_id = f"{group}/providers/{VNET_TYPE}/{tail[0]}"
        if len(tail) == 1:
            if method == "GET":
                return "VirtualNetworks_Get", lambda: _json(_vnet_view(self._vnet_or_404(vnet_id)))
            if method == "PUT":
                return "VirtualNetworks_CreateOrUpdate", lambda: self._put_vnet(vnet_id)
            return None
        if tail[1].lower() != "subnets" or len(tail) > 3:
            return None
        if len(tail) == 2:
            if method == "GET":
                return "Subnets_List", lambda: self._list_subnets(vnet_id)
            return None
        if method == "GET":
            return "Subnets_Get", lambda: self._get_subnet(vnet_id, tail[2])
        if method == "PUT":
            return "Subnets_CreateOrUpdate", lambda: self._put_subnet(vnet_id, tail[2])
        return None

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
            raise _server_error(request)
        auth = request.headers.get("Authorization", "")
        if not auth.startswith(f"Bearer {TOKEN_PREFIX}"):
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

    # Handlers run under self._lock, one request at a time, so the current request can live
    # on the instance.
    _request: Request

    def _api_version(self) -> str:
        return self._request.args.get("api-version", "")

    def _body(self) -> dict[str, Any]:
        try:
            body = json.loads(self._request.get_data() or b"{}")
        except ValueError:
            raise ArmError(400, "InvalidRequestContent", "The request body is not JSON.") from None
        if not isinstance(body, dict):
            raise ArmError(400, "InvalidRequestContent", "The request body must be an object.")
        return body

    # -- Entra ID ----------------------------------------------------------------------------

    def _openid(self, tenant: str) -> Response:
        base = f"{self.endpoint}/{tenant}"
        return _json(
            {
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "issuer": f"{base}/v2.0",
                "token_endpoint_auth_methods_supported": ["client_secret_post"],
                "response_types_supported": ["code", "id_token", "token"],
                "tenant_region_scope": "WW",
            }
        )

    def _token(self, request: Request) -> Response:
        form = request.form
        if not form.get("client_id") or not (
            form.get("client_secret") or form.get("client_assertion")
        ):
            return _json(
                {
                    "error": "invalid_client",
                    "error_description": "AADSTS7000215: Invalid client secret provided.",
                },
                400,
            )
        return _json(
            {
                "token_type": "Bearer",
                "expires_in": TOKEN_LIFETIME_S,
                "ext_expires_in": TOKEN_LIFETIME_S,
                "access_token": TOKEN_PREFIX + secrets.token_hex(16),
            }
        )

    # -- virtual machines --------------------------------------------------------------------

    def _put_vm(self, rid: str) -> Response:
        body = self._body()
        sent = json.loads(json.dumps(body))
        try:
            vm, status = self._store_vm(rid, body)
        except ArmError as error:
            self._vm_puts.append(RecordedPut(rid, sent, error.status, error.code))
            raise
        self._vm_puts.append(RecordedPut(rid, sent, status))
        return self._vm_accepted(vm, status, "create")

    def preload(self, resource_id: str, body: dict[str, Any]) -> None:
        """Hold a VM as if a PUT of `body` had created it: a fast set-up for big lists. What
        the body names is not checked (such VMs were made before the test, by any means)."""
        with self._lock:
            self._store_vm(resource_id, json.loads(json.dumps(body)), check=False)

    def _store_vm(self, rid: str, body: dict[str, Any], *, check: bool = True) -> tuple[_Vm, int]:
        props = body.get("properties") or {}
        location = str(body.get("location") or "").lower().replace(" ", "")
        if not location:
            raise ArmError(400, "LocationRequired", "The location property is required.")
        if check:
            self._check_vm(rid, location, props)
        os_profile = dict(props.get("osProfile") or {})
        digest = hashlib.sha256(json.dumps(os_profile, sort_keys=True).encode()).hexdigest()
        existing = self._vms.get(_key(rid))
        if existing is not None:
            return self._update_vm(existing, body, digest), 200
        behaviour = self.faults.behaviour
        quota = behaviour.quota_instances
        if quota is not None and len(self._vms) >= quota:
            raise ArmError(
                409,
                "OperationNotAllowed",
                "Operation could not be completed as it results in exceeding approved Total "
                "Regional Cores quota. Additional details - Deployment Model: Resource Manager, "
                f"Location: {location}, Current Limit: {quota}, Current Usage: {len(self._vms)}, "
                f"Additional Required: 1, (Minimum) New Limit Required: {len(self._vms) + 1}.",
            )
        vm = _Vm(
            id=rid,
            name=rid.rsplit("/", 1)[1],
            location=location,
            tags=dict(body.get("tags") or {}),
            properties=_strip_secrets(props),
            os_profile_digest=digest,
            user_data=props.get("userData"),
            created_at=time.time(),
            boot_s=behaviour.boot_s,
            custom_data=os_profile.get("customData"),
            resource_fields={k: body[k] for k in VM_RESOURCE_FIELDS if k in body},
        )
        self._attach_network(vm, rid)
        self._attach_os_disk(vm, rid)
        self._attach_data_disks(vm, rid)
        self._vms[_key(rid)] = vm
        if vm.spot:
            self.preemptions.schedule(vm.id, time.monotonic() + vm.boot_s)
        return vm, 201

    def _update_vm(self, vm: _Vm, body: dict[str, Any], digest: str) -> _Vm:
        if vm.deleted_at is not None:
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Operation 'PUT' is not allowed on VM '{vm.name}' since the VM is marked for "
                "deletion. You can only retry the Delete operation.",
            )
        if digest != vm.os_profile_digest:
            raise ArmError(
                409,
                "PropertyChangeNotAllowed",
                "Changing property 'osProfile.adminPassword' is not allowed.",
            )
        vm.tags = dict(body.get("tags") or vm.tags)
        return vm

    def _vm_accepted(self, vm: _Vm, status: int, kind: str) -> Response:
        operation = self._new_operation(_key(vm.id), kind)
        response = _json(self._vm_model(vm), status)
        response.headers["Azure-AsyncOperation"] = self._operation_url(vm.location, operation)
        return response

    def _attach_network(self, vm: _Vm, rid: str) -> None:
        network = vm.properties.setdefault("networkProfile", {})
        prefix = rid.split("/providers/")[0]
        refs = []
        for ref in network.get("networkInterfaces") or []:
            nic = self._resources.get(_key(str(ref.get("id", ""))))
            if nic is None or nic.type != NIC_TYPE:
                raise ArmError(
                    400,
                    "InvalidResourceReference",
                    f"Resource {ref.get('id')} referenced by resource {rid} was not found.",
                )
            nic.owner = _key(rid)
            nic.delete_with_owner = _deletes(ref.get("properties"))
            refs.append(ref)
        for config in network.get("networkInterfaceConfigurations") or []:
            nic_id = f"{prefix}/providers/{NIC_TYPE}/{config['name']}"
            nic_props = config.get("properties") or {}
            tags = dict(config.get("tags") or {})
            nic = self._make_nic(nic_id, vm.location, tags, nic_props, prefix)
            nic.owner = _key(rid)
            nic.delete_with_owner = _deletes(nic_props)
            refs.append(
                {
                    "id": nic_id,
                    "properties": {
                        "primary": bool(nic_props.get("primary", True)),
                        "deleteOption": nic_props.get("deleteOption", "Detach"),
                    },
                }
            )
        network["networkInterfaces"] = refs

    def _make_nic(
        self,
        nic_id: str,
        location: str,
        tags: dict[str, str],
        props: dict[str, Any],
        prefix: str,
    ) -> _Resource:
        ip_configs = []
        for index, config in enumerate(props.get("ipConfigurations") or []):
            cprops = dict(config.get("properties") or {})
            out: dict[str, Any] = {
                "privateIPAddress": f"10.0.{len(self._resources) % 250}.{index + 4}",
                "privateIPAllocationMethod": cprops.get("privateIPAllocationMethod", "Dynamic"),
                "primary": cprops.get("primary", index == 0),
                "provisioningState": "Succeeded",
            }
            if cprops.get("subnet"):
                out["subnet"] = cprops["subnet"]
            ip_id = self._public_ip_for(cprops, location, prefix, nic_id)
            if ip_id:
                out["publicIPAddress"] = {"id": ip_id}
            ip_configs.append(
                {
                    "id": f"{nic_id}/ipConfigurations/{config.get('name', 'ipconfig1')}",
                    "name": config.get("name", "ipconfig1"),
                    "properties": out,
                }
            )
        nic = _Resource(
            id=nic_id,
            type=NIC_TYPE,
            name=nic_id.rsplit("/", 1)[1],
            location=location,
            tags=tags,
            properties={
                "provisioningState": "Succeeded",
                "ipConfigurations": ip_configs,
                "macAddress": "00-0D-3A-" + secrets.token_hex(3).upper(),
            },
        )
        self._resources[_key(nic_id)] = nic
        return nic

    def _public_ip_for(
        self, cprops: dict[str, Any], location: str, prefix: str, nic_id: str
    ) -> str | None:
        config = cprops.get("publicIPAddressConfiguration")
        if config:  # created with the VM
            ip_props = config.get("properties") or {}
            ip_id = f"{prefix}/providers/{IP_TYPE}/{config['name']}"
            tags = dict(config.get("tags") or {})
            ip = self._make_ip(ip_id, location, tags, ip_props, config.get("sku"))
            ip.owner, ip.delete_with_owner = _key(nic_id), _deletes(ip_props)
            return ip_id
        ref = cprops.get("publicIPAddress")
        if ref and ref.get("id"):  # an existing public IP (the multi-step way, templates)
            ip = self._resources.get(_key(str(ref.get("id", ""))))
            if ip is None:
                raise ArmError(
                    400,
                    "InvalidResourceReference",
                    f"Resource {ref.get('id')} referenced by resource {nic_id} was not found.",
                )
            ip.owner = _key(nic_id)
            ip.delete_with_owner = _deletes(ref.get("properties"))
            return ip.id
        return None

    def _make_ip(
        self,
        ip_id: str,
        location: str,
        tags: dict[str, str],
        props: dict[str, Any],
        sku: dict[str, Any] | None,
    ) -> _Resource:
        ip = _Resource(
            id=ip_id,
            type=IP_TYPE,
            name=ip_id.rsplit("/", 1)[1],
            location=location,
            tags=tags,
            sku=sku or {"name": "Standard"},
            properties={
                "provisioningState": "Succeeded",
                "publicIPAllocationMethod": props.get("publicIPAllocationMethod", "Static"),
                "publicIPAddressVersion": props.get("publicIPAddressVersion", "IPv4"),
                "ipAddress": f"203.0.113.{len(self._resources) % 250 + 1}",
            },
        )
        self._resources[_key(ip_id)] = ip
        return ip

    def _attach_os_disk(self, vm: _Vm, rid: str) -> None:
        storage = vm.properties.setdefault("storageProfile", {})
        os_disk = storage.setdefault("osDisk", {"createOption": "FromImage"})
        self._make_disk(vm, rid, os_disk, f"{vm.name}_OsDisk_1", default_size_gb=30)

    def _attach_data_disks(self, vm: _Vm, rid: str) -> None:
        storage = vm.properties.setdefault("storageProfile", {})
        for disk in storage.get("dataDisks") or []:
            if str(disk.get("createOption", "")).lower() == "attach":
                # An existing disk: not the sim's to make, but its VM's from now on.
                held = self._resources.get(_key(str(_object(disk.get("managedDisk")).get("id"))))
                if held is not None and held.type == DISK_TYPE:
                    held.owner, held.delete_with_owner = _key(rid), _deletes(disk)
                    held.properties["diskState"] = "Attached"
                continue
            self._make_disk(vm, rid, disk, f"{vm.name}_disk{disk.get('lun')}", default_size_gb=0)

    def _make_disk(
        self, vm: _Vm, rid: str, disk: dict[str, Any], prefix: str, *, default_size_gb: int
    ) -> None:
        """A managed disk the VM's body asks ARM to make: named (ARM's default name when the
        body gives none), held as a resource of the VM, deleted with it per its deleteOption."""
        name = disk.get("name") or f"{prefix}_{uuid.uuid4().hex}"
        disk_id = f"{rid.split('/providers/')[0]}/providers/{DISK_TYPE}/{name}"
        disk["name"] = name
        disk.setdefault("deleteOption", "Detach")
        disk.setdefault("managedDisk", {})["id"] = disk_id
        self._resources[_key(disk_id)] = _Resource(
            id=disk_id,
            type=DISK_TYPE,
            name=name,
            location=vm.location,
            tags={},
            properties={
                "provisioningState": "Succeeded",
                "diskState": "Attached",
                "diskSizeGB": int(disk.get("diskSizeGB") or default_size_gb),
            },
            owner=_key(rid),
            delete_with_owner=_deletes(disk),
        )

    # -- what a VM PUT may name --------------------------------------------------------------

    def _check_vm(self, rid: str, location: str, props: dict[str, Any]) -> None:
        """Refuse, as ARM does, a VM body naming what does not exist or breaking its rules."""
        _check_size(props)
        storage = _object(props.get("storageProfile"))
        os_disk = storage.get("osDisk")
        if not isinstance(os_disk, dict):
            raise _missing("osDisk")
        create = str(os_disk.get("createOption") or "")
        if not create:
            raise _missing("osDisk.createOption")
        if create.lower() not in DISK_CREATE_OPTIONS:
            raise _invalid(
                f"The value '{create}' of parameter 'osDisk.createOption' is not valid.",
                "osDisk.createOption",
            )
        if create.lower() == "fromimage":
            self._check_image(location, storage.get("imageReference"))
        _check_data_disks(storage.get("dataDisks"))
        _check_priority(props)
        os_profile = _object(props.get("osProfile"))
        if os_profile and not os_profile.get("adminUsername"):
            raise _missing("adminUsername")
        self._check_network(rid, props)

    def _check_image(self, location: str, image: Any) -> None:
        image = _object(image)
        by_id = (
            image.get("id")
            or image.get("sharedGalleryImageId")
            or image.get("communityGalleryImageId")
        )
        if by_id:
            if self._image_known(str(by_id)):
                return
            if "galleries/" in str(by_id).lower():
                raise ArmError(
                    404,
                    "GalleryImageNotFound",
                    f"The gallery image {by_id} is not available in {location} region. Please "
                    "contact image owner to replicate to this region, or change your requested "
                    "region.",
                    target="imageReference",
                )
            raise ArmError(
                404,
                "NotFound",
                f"The Image '{by_id}' cannot be found in '{location}' region.",
                target="imageReference",
            )
        if not image:
            raise _missing("imageReference")
        for part in ("publisher", "offer", "sku"):
            if not image.get(part):
                raise _missing(f"imageReference.{part}")
        triple = tuple(str(image[part]).lower() for part in ("publisher", "offer", "sku"))
        if triple not in MARKETPLACE_IMAGES:
            urn = ":".join([*map(str, (image["publisher"], image["offer"], image["sku"]))])
            raise ArmError(
                404,
                "PlatformImageNotFound",
                f"The platform image '{urn}:{image.get('version') or 'latest'}' is not "
                "available. Verify that all fields in the storage profile are correct. For more "
                "details about storage profile information, please refer to "
                "https://aka.ms/storageprofile",
                target="imageReference",
            )

    def _image_known(self, image_id: str) -> bool:
        key = _key(image_id.rstrip("/"))
        if key in self._images:
            return True
        # A gallery image definition (its latest version), or a version of a definition.
        definition = key.rsplit("/versions/", 1)[0]
        return any(
            known == definition or known.startswith(definition + "/versions/")
            for known in self._images
        )

    def _check_network(self, rid: str, props: dict[str, Any]) -> None:
        network = _object(props.get("networkProfile"))
        configs = network.get("networkInterfaceConfigurations") or []
        if not network.get("networkInterfaces") and not configs:
            raise _missing("networkProfile")
        for ref in network.get("networkInterfaces") or []:
            nic = self._resources.get(_key(str(_object(ref).get("id", ""))))
            if nic is None or nic.type != NIC_TYPE:
                raise ArmError(
                    400,
                    "InvalidResourceReference",
                    f"Resource {_object(ref).get('id')} referenced by resource {rid} was not "
                    "found.",
                )
        prefix = rid.split("/providers/")[0]
        for config in configs:
            nic_id = f"{prefix}/providers/{NIC_TYPE}/{_object(config).get('name')}"
            for ip_config in (
                _object(_object(config).get("properties")).get("ipConfigurations") or []
            ):
                subnet = _object(_object(_object(ip_config).get("properties")).get("subnet"))
                if not subnet.get("id"):
                    raise _missing("ipConfiguration.subnet")
                self._check_subnet(str(subnet["id"]), nic_id)

    def _check_subnet(self, subnet_id: str, referrer: str) -> None:
        if not self._subnet_known(subnet_id):
            raise ArmError(
                400,
                "InvalidResourceReference",
                f"Resource {subnet_id} referenced by resource {referrer} was not found. Please "
                "make sure that the referenced resource exists, and that both resources are in "
                "the same region.",
            )

    def _subnet_known(self, subnet_id: str) -> bool:
        parts = subnet_id.lower().strip("/").split("/")
        if len(parts) != 10 or parts[8] != "subnets":
            return False
        expected = ["subscriptions", "resourcegroups", "providers", "microsoft.network"]
        if [parts[0], parts[2], parts[4], parts[5], parts[6]] != [*expected, "virtualnetworks"]:
            return False
        vnet = self._vnet("/" + "/".join(parts[:8]))
        return vnet is not None and parts[9] in vnet.subnets

    # -- virtual networks and images -------------------------------------------------------

    def _vnet(self, vnet_id: str) -> _Vnet | None:
        """A created virtual network, else the default one of its resource group."""
        found = self._vnets.get(_key(vnet_id))
        if found is not None or vnet_id.rsplit("/", 1)[1].lower() != DEFAULT_VNET:
            return found
        canonical = vnet_id.rsplit("/", 1)[0] + "/" + DEFAULT_VNET
        subnet = {"addressPrefix": DEFAULT_SUBNET_PREFIX, "provisioningState": "Succeeded"}
        return _Vnet(
            id=canonical,
            name=DEFAULT_VNET,
            location="eastus",
            tags={},
            address_prefixes=[DEFAULT_VNET_PREFIX],
            subnets={DEFAULT_SUBNET: {"name": DEFAULT_SUBNET, "properties": subnet}},
        )

    def _vnet_or_404(self, vnet_id: str) -> _Vnet:
        vnet = self._vnet(vnet_id)
        if vnet is None:
            rg, name = vnet_id.split("/")[4], vnet_id.rsplit("/", 1)[1]
            raise ArmError(
                404,
                "ResourceNotFound",
                f"The Resource '{VNET_TYPE}/{name}' under resource group '{rg}' was not found.",
            )
        return vnet

    def _put_vnet(self, vnet_id: str) -> Response:
        body = self._body()
        location = str(body.get("location") or "").lower().replace(" ", "")
        if not location:
            raise ArmError(400, "LocationRequired", "The location property is required.")
        props = _object(body.get("properties"))
        subnets = {}
        for subnet in props.get("subnets") or []:
            name = str(_object(subnet).get("name") or "")
            if not name:
                raise _missing("subnet.name")
            subnet_props = dict(_object(_object(subnet).get("properties")))
            subnet_props["provisioningState"] = "Succeeded"
            subnets[name.lower()] = {"name": name, "properties": subnet_props}
        existed = _key(vnet_id) in self._vnets
        vnet = _Vnet(
            id=vnet_id,
            name=vnet_id.rsplit("/", 1)[1],
            location=location,
            tags=dict(body.get("tags") or {}),
            address_prefixes=list(_object(props.get("addressSpace")).get("addressPrefixes") or []),
            subnets=subnets,
        )
        self._vnets[_key(vnet_id)] = vnet
        return self._accepted(_vnet_view(vnet), 200 if existed else 201, vnet_id, location)

    def _put_subnet(self, vnet_id: str, name: str) -> Response:
        vnet = self._vnet(vnet_id)
        if vnet is None:
            raise ArmError(
                404,
                "ParentResourceNotFound",
                "Can not perform requested operation on nested resource. Parent resource "
                f"'{vnet_id.rsplit('/', 1)[1]}' not found.",
            )
        self._vnets[_key(vnet.id)] = vnet  # a default network, once changed, is held
        props = dict(_object(self._body().get("properties")))
        props["provisioningState"] = "Succeeded"
        existed = name.lower() in vnet.subnets
        vnet.subnets[name.lower()] = {"name": name, "properties": props}
        view = _subnet_view(vnet, vnet.subnets[name.lower()])
        return self._accepted(view, 200 if existed else 201, view["id"], vnet.location)

    def _get_subnet(self, vnet_id: str, name: str) -> Response:
        vnet = self._vnet_or_404(vnet_id)
        subnet = vnet.subnets.get(name.lower())
        if subnet is None:
            raise ArmError(404, "NotFound", f"Resource {vnet.id}/subnets/{name} not found.")
        return _json(_subnet_view(vnet, subnet))

    def _list_subnets(self, vnet_id: str) -> Response:
        vnet = self._vnet_or_404(vnet_id)
        return _json({"value": [_subnet_view(vnet, s) for s in vnet.subnets.values()]})

    def _list_vnets(self, group: str) -> Response:
        prefix = _key(group) + "/providers/"
        held = [v for k, v in self._vnets.items() if k.startswith(prefix)]
        default = self._vnet(f"{group}/providers/{VNET_TYPE}/{DEFAULT_VNET}")
        if default is not None and all(_key(v.id) != _key(default.id) for v in held):
            held.append(default)
        return _json({"value": [_vnet_view(v) for v in held]})

    def _put_image(self, rid: str) -> Response:
        body = self._body()
        location = str(body.get("location") or "").lower().replace(" ", "")
        if not location:
            raise ArmError(400, "LocationRequired", "The location property is required.")
        existed = _key(rid) in self._images
        model = _image_model(rid, location, dict(body.get("tags") or {}))
        self._images[_key(rid)] = model
        return self._accepted(model, 200 if existed else 201, rid, location)

    def _get_image(self, rid: str) -> Response:
        model = self._images.get(_key(rid))
        if model is None:
            rg, name = rid.split("/")[4], rid.rsplit("/", 1)[1]
            raise ArmError(
                404,
                "ResourceNotFound",
                f"The Resource '{IMAGE_TYPE}/{name}' under resource group '{rg}' was not found.",
            )
        return _json(model)

    def _accepted(self, view: dict[str, Any], status: int, rid: str, location: str) -> Response:
        operation = self._new_operation(_key(rid), "done")
        response = _json(view, status)
        response.headers["Azure-AsyncOperation"] = self._operation_url(location, operation)
        return response

    def _get_vm(self, rid: str) -> Response:
        vm = self._vm_or_404(rid)
        expand = self._request.args.get("$expand", "").lower()
        return _json(
            self._vm_model(
                vm, instance_view=expand == "instanceview", user_data=expand == "userdata"
            )
        )

    def _instance_view(self, rid: str) -> Response:
        return _json(self._vm_instance_view(self._vm_or_404(rid)))

    def _delete_vm(self, rid: str) -> Response:
        vm = self._vms.get(_key(rid))
        if vm is None:
            return self._delete_missing(rid)
        if vm.deleted_at is None:
            vm.deleted_at = time.time()
            vm.delete_s = self.faults.behaviour.delete_s
        operation = self._new_operation(_key(rid), "delete")
        response = Response(status=202)
        url = self._operation_url(vm.location, operation)
        response.headers["Azure-AsyncOperation"] = url
        response.headers["Location"] = url
        return response

    def _list_vms(self, sub: str, rg: str | None, location: str | None) -> Response:
        args = self._request.args
        status_only = args.get("statusOnly", "").lower() == "true"
        if args.get("$expand") and not args.get("$filter"):
            raise ArmError(
                400,
                "InvalidParameter",
                "The value 'instanceView' of parameter '$expand' requires a valid '$filter'.",
            )
        prefix = f"/subscriptions/{sub}/".lower()
        if rg is not None:
            prefix += f"resourcegroups/{rg}/".lower()
        vms = [
            vm
            for key, vm in self._vms.items()
            if key.startswith(prefix) and (location is None or vm.location == location)
        ]
        render = self._vm_status_only if status_only else self._vm_model
        return self._page(vms, render, {"statusOnly": "true"} if status_only else {})

    def _page(
        self, items: Iterable[Any], render: Callable[[Any], dict[str, Any]], extra: dict[str, str]
    ) -> Response:
        size = DEFAULT_PAGE_SIZE
        if self.faults.behaviour.page_size_max:
            size = min(size, self.faults.behaviour.page_size_max)
        after = self._request.args.get("$skiptoken", "").lower()
        ordered = sorted((_key(i.id), i) for i in items)
        remaining = [item for key, item in ordered if key > after]
        page, more = remaining[:size], len(remaining) > size
        body: dict[str, Any] = {"value": [render(item) for item in page]}
        if more:
            query = [f"api-version={quote(self._api_version())}"]
            query += [f"{k}={quote(v)}" for k, v in extra.items()]
            query.append(f"$skiptoken={quote(_key(page[-1].id), safe='')}")
            body["nextLink"] = f"{self.endpoint}{self._request.path}?{'&'.join(query)}"
        return _json(body)

    def _vm_or_404(self, rid: str) -> _Vm:
        vm = self._vms.get(_key(rid))
        if vm is None:
            name = rid.rsplit("/", 1)[1]
            rg = rid.split("/")[4]
            raise ArmError(
                404,
                "ResourceNotFound",
                f"The Resource '{VM_TYPE}/{name}' under resource group '{rg}' was not found.",
            )
        return vm

    # -- VM views ----------------------------------------------------------------------------

    def _phase(self, vm: _Vm) -> str:
        return lifecycle_state(time.time(), vm.created_at, vm.boot_s, vm.deleted_at, vm.delete_s)

    def _provisioning(self, vm: _Vm) -> str:
        phase = self._phase(vm)
        if phase == "stopping":
            return "Deleting"
        if vm.failure:
            return "Failed"
        return "Creating" if phase == "pending" else "Succeeded"

    def _statuses(self, vm: _Vm) -> list[dict[str, Any]]:
        provisioning = self._provisioning(vm)
        if provisioning == "Failed":
            code, message = vm.failure or ("", "")
            return [
                {
                    "code": f"ProvisioningState/failed/{code}",
                    "level": "Error",
                    "displayStatus": "Provisioning failed",
                    "message": message,
                    "time": _now_iso(),
                }
            ]
        if provisioning == "Deleting":
            power = "stopping"
        elif provisioning == "Creating":
            power = "starting"
        else:
            power = vm.power or "running"
        return [
            {
                "code": f"ProvisioningState/{provisioning.lower()}",
                "level": "Info",
                "displayStatus": f"Provisioning {provisioning.lower()}",
                "time": _now_iso(vm.created_at + vm.boot_s),
            },
            {"code": f"PowerState/{power}", "level": "Info", "displayStatus": f"VM {power}"},
        ]

    def _vm_instance_view(self, vm: _Vm) -> dict[str, Any]:
        computer = (vm.properties.get("osProfile") or {}).get("computerName", vm.name)
        return {"computerName": computer, "statuses": self._statuses(vm)}

    def _vm_model(
        self, vm: _Vm, *, instance_view: bool = False, user_data: bool = False
    ) -> dict[str, Any]:
        props = json.loads(json.dumps(vm.properties))
        props.pop("userData", None)
        props.update(
            vmId=vm.vm_id,
            provisioningState=self._provisioning(vm),
            timeCreated=_now_iso(vm.created_at),
        )
        if instance_view:
            props["instanceView"] = self._vm_instance_view(vm)
        if user_data and vm.user_data is not None:
            props["userData"] = vm.user_data
        return {
            "id": vm.id,
            "name": vm.name,
            "type": VM_TYPE,
            "location": vm.location,
            "tags": dict(vm.tags),
            **json.loads(json.dumps(vm.resource_fields)),
            "properties": props,
        }

    def _vm_status_only(self, vm: _Vm) -> dict[str, Any]:
        # What statusOnly=true carries: the instance view, no tags, no model.
        return {
            "id": vm.id,
            "name": vm.name,
            "type": VM_TYPE,
            "location": vm.location,
            "properties": {"instanceView": self._vm_instance_view(vm)},
        }

    def _sim_vm(self, vm: _Vm) -> SimVm:
        phase = self._phase(vm)
        if vm.failure or (vm.power and phase == "running"):
            phase = "stopped"
        return SimVm(
            cloud_id=vm.id,
            name=vm.name,
            region=vm.location,
            state=phase,
            tags=dict(vm.tags),
            spot=vm.spot,
        )

    # -- NICs, public IPs, disks -------------------------------------------------------------

    def _put_child(self, rid: str, rtype: str) -> Response:
        resource, status = self._store_child(rid, rtype, self._body())
        operation = self._new_operation(_key(rid), "done")
        response = _json(_child_view(resource), status)
        response.headers["Azure-AsyncOperation"] = self._operation_url(resource.location, operation)
        return response

    def _store_child(self, rid: str, rtype: str, body: dict[str, Any]) -> tuple[_Resource, int]:
        """Create (201) or update (200: tags) a NIC, public IP or disk from a PUT body."""
        location = str(body.get("location") or "").lower().replace(" ", "")
        if not location:
            raise ArmError(400, "LocationRequired", "The location property is required.")
        tags = dict(body.get("tags") or {})
        props = body.get("properties") or {}
        existing = self._resources.get(_key(rid))
        if rtype == NIC_TYPE:
            for config in props.get("ipConfigurations") or []:
                subnet = _object(_object(_object(config).get("properties")).get("subnet"))
                if subnet.get("id"):
                    self._check_subnet(str(subnet["id"]), rid)
        if existing is not None:
            existing.tags = tags
            return existing, 200
        if rtype == NIC_TYPE:
            return self._make_nic(rid, location, tags, props, rid.split("/providers/")[0]), 201
        if rtype == IP_TYPE:
            return self._make_ip(rid, location, tags, props, body.get("sku")), 201
        disk = _Resource(
            id=rid,
            type=DISK_TYPE,
            name=rid.rsplit("/", 1)[1],
            location=location,
            tags=tags,
            sku=body.get("sku"),
            properties={
                "provisioningState": "Succeeded",
                "diskState": "Unattached",
                "diskSizeGB": int(props.get("diskSizeGB") or 0),
                "creationData": dict(
                    _object(props.get("creationData")) or {"createOption": "Empty"}
                ),
            },
        )
        self._resources[_key(rid)] = disk
        return disk, 201

    def _get_child(self, rid: str) -> Response:
        resource = self._resources.get(_key(rid))
        if resource is None:
            rtype, name = rid.split("/providers/")[1].rsplit("/", 1)
            raise ArmError(404, "ResourceNotFound", f"The Resource '{rtype}/{name}' was not found.")
        return _json(_child_view(resource))

    def _delete_child(self, rid: str) -> Response:
        resource = self._resources.get(_key(rid))
        if resource is None:
            return self._delete_missing(rid)
        if resource.owner and (resource.owner in self._vms or resource.owner in self._resources):
            raise _in_use(resource)
        self._drop_resource(_key(rid))
        return Response(status=200)

    def _delete_missing(self, rid: str) -> Response:
        if self.delete_missing_status == 404:
            rtype, name = rid.split("/providers/")[1].rsplit("/", 1)
            raise ArmError(404, "ResourceNotFound", f"The Resource '{rtype}/{name}' was not found.")
        return Response(status=self.delete_missing_status)

    def _list_children(self, sub: str, rg: str, rtype: str) -> Response:
        prefix = f"/subscriptions/{sub}/resourcegroups/{rg}/providers/{rtype}/".lower()
        items = [r for k, r in self._resources.items() if k.startswith(prefix)]
        return self._page(items, _child_view, {})

    # -- async operations --------------------------------------------------------------------

    def _new_operation(self, target: str, kind: str) -> _Operation:
        operation = _Operation(id=str(uuid.uuid4()), target=target, kind=kind)
        self._operations[operation.id] = operation
        return operation

    def _operation_url(self, location: str, operation: _Operation) -> str:
        sub = operation.target.split("/")[2]
        return (
            f"{self.endpoint}/subscriptions/{sub}/providers/Microsoft.Compute/locations/"
            f"{location}/operations/{operation.id}?api-version={quote(self._api_version())}"
        )

    def _operation(self, op_id: str) -> Response:
        operation = self._operations.get(op_id)
        if operation is None:
            raise ArmError(404, "NotFound", f"Operation {op_id} was not found.")
        body: dict[str, Any] = {"name": op_id, "startTime": _now_iso()}
        vm = self._vms.get(operation.target)
        if operation.kind == "done":
            body["status"] = "Succeeded"
        elif operation.kind == "delete":
            body["status"] = "InProgress" if vm else "Succeeded"
        elif vm is None:
            body["status"] = "Canceled"
        elif vm.failure:
            code, message = vm.failure
            body.update(status="Failed", error={"code": code, "message": message})
        else:
            body["status"] = "InProgress" if self._phase(vm) == "pending" else "Succeeded"
        return _json(body)

    # -- deletion and cascades ---------------------------------------------------------------

    def _sweep(self) -> None:
        """Drop VMs whose delete finished, with what they delete; move deployments on."""
        now = time.time()
        for key, vm in list(self._vms.items()):
            if vm.deleted_at is not None and now >= vm.deleted_at + vm.delete_s:
                self._drop_vm(key)
        self.deployments.advance(now)

    def _drop_vm(self, key: str) -> None:
        self._vms.pop(key, None)
        for child_key, child in list(self._resources.items()):
            if child.owner == key:
                self._release(child_key, child)

    def _release(self, key: str, resource: _Resource) -> None:
        if resource.delete_with_owner:
            self._drop_resource(key)
        else:
            resource.owner = None
            if resource.type == DISK_TYPE:
                resource.properties["diskState"] = "Unattached"

    def _drop_resource(self, key: str) -> None:
        self._resources.pop(key, None)
        for child_key, child in list(self._resources.items()):
            if child.owner == key:
                self._release(child_key, child)

    # -- control endpoints (not counted, not faulted) ----------------------------------------

    def _control(self, request: Request, path: list[str]) -> Response:
        body = request.get_json(silent=True) or {}
        found = self.deployments.control(request.method, path, body, dict(request.args))
        if found is not None:
            return found
        match request.method, path:
            case "GET", ["requests"]:
                return _json(self.faults.counts())
            case "POST", ["requests", "reset"]:
                self.faults.reset_counts()
            case "POST", ["behaviour"]:
                try:
                    self.faults.behaviour.update(**body)
                except ValueError as exc:
                    return _json({"error": str(exc)}, 400)
            case "GET", ["instances"]:
                return _json([_sim_vm_json(vm) for vm in self.instances()])
            case "GET", ["resources"]:
                return _json(self.resources())
            case "GET", ["vm-puts"]:
                return _json([put.as_json() for put in self.vm_puts(request.args.get("name"))])
            case "POST", ["images"]:
                if not body.get("id"):
                    return _json({"error": 'body must be {"id": <image resource id>}'}, 400)
                self.register_image(str(body["id"]), str(body.get("location") or "eastus"))
            case "POST", ["kill"]:
                return self._control_vm(
                    lambda: self.kill(body["id"], body.get("reason") or "preempted")
                )
            case "POST", ["remove"]:
                return self._control_vm(lambda: self.remove(body["id"]))
            case "POST", ["fail"]:
                return self._control_vm(lambda: self.fail(body["id"]))
            case "POST", ["reset"]:
                self.reset()
            case "GET", ["attested", vm_name]:
                nonce = request.args.get("nonce") or None
                return self._control_vm_json(lambda: self.attested_document(vm_name, nonce))
            case _:
                return _json({"error": f"no control route {request.method} {request.path}"}, 404)
        return _json({"ok": True})

    @staticmethod
    def _control_vm_json(action: Callable[[], Any]) -> Response:
        try:
            return _json(action())
        except KeyError as exc:
            return _json({"error": f"no such VM: {exc}"}, 404)

    @staticmethod
    def _control_vm(action: Callable[[], None]) -> Response:
        try:
            action()
        except KeyError as exc:
            return _json({"error": f"no such VM: {exc}"}, 404)
        return _json({"ok": True})


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _check_size(props: dict[str, Any]) -> None:
    size = _object(props.get("hardwareProfile")).get("vmSize")
    if not size:
        raise _missing("hardwareProfile.vmSize")
    if str(size).lower() not in VM_SIZES:
        raise _invalid(
            f"The value {size} provided for the VM size is not valid. The valid sizes in the "
            "current region are: " + ", ".join(VM_SIZE_NAMES) + ".",
            "hardwareProfile.vmSize",
        )


def _check_data_disks(disks: Any) -> None:
    luns: set[int] = set()
    for disk in disks or []:
        disk = _object(disk)
        lun = disk.get("lun")
        if not isinstance(lun, int) or isinstance(lun, bool) or lun < 0:
            raise _missing("dataDisk.lun")
        if lun in luns:
            raise _invalid(f"A disk at LUN {lun} already exists.", "dataDisks")
        luns.add(lun)
        create = str(disk.get("createOption") or "")
        if not create:
            raise _missing("dataDisk.createOption")
        if create.lower() not in DISK_CREATE_OPTIONS:
            raise _invalid(
                f"The value '{create}' of parameter 'dataDisk.createOption' is not valid.",
                "dataDisk.createOption",
            )
        if create.lower() == "empty" and not disk.get("diskSizeGB"):
            raise _missing("dataDisk.diskSizeGB")


def _check_priority(props: dict[str, Any]) -> None:
    priority = props.get("priority")
    if priority is not None and str(priority).lower() not in PRIORITIES:
        raise _invalid(
            f"The value '{priority}' of parameter 'priority' is not valid. Allowed values are "
            "Regular, Low, Spot.",
            "priority",
        )
    spot = str(priority or "").lower() in ("spot", "low")
    policy = props.get("evictionPolicy")
    if policy is not None:
        if str(policy).lower() not in EVICTION_POLICIES:
            raise _invalid(
                f"The value '{policy}' of parameter 'evictionPolicy' is not valid. Allowed "
                "values are Deallocate, Delete.",
                "evictionPolicy",
            )
        if not spot:
            raise _invalid(
                "Eviction policy can be set only for Azure Spot Virtual Machines (priority Spot).",
                "evictionPolicy",
            )
    billing = props.get("billingProfile")
    if billing is None:
        return
    if not spot:
        raise _invalid(
            "Billing profile can be set only for Azure Spot Virtual Machines (priority Spot).",
            "billingProfile",
        )
    price = _object(billing).get("maxPrice")
    if price is not None and (
        isinstance(price, bool)
        or not isinstance(price, int | float)
        or (price != -1 and price <= 0)
    ):
        raise _invalid(
            f"The value '{price}' of parameter 'billingProfile.maxPrice' is not valid: it "
            "must be -1 or greater than zero.",
            "billingProfile.maxPrice",
        )


def _image_model(image_id: str, location: str, tags: dict[str, str]) -> dict[str, Any]:
    return {
        "id": image_id,
        "name": image_id.rstrip("/").rsplit("/", 1)[1],
        "type": IMAGE_TYPE,
        "location": location,
        "tags": tags,
        "properties": {"provisioningState": "Succeeded"},
    }


def _vnet_view(vnet: _Vnet) -> dict[str, Any]:
    return {
        "id": vnet.id,
        "name": vnet.name,
        "type": VNET_TYPE,
        "location": vnet.location,
        "tags": dict(vnet.tags),
        "properties": {
            "provisioningState": "Succeeded",
            "addressSpace": {"addressPrefixes": list(vnet.address_prefixes)},
            "subnets": [_subnet_view(vnet, s) for s in vnet.subnets.values()],
        },
    }


def _subnet_view(vnet: _Vnet, subnet: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"{vnet.id}/subnets/{subnet['name']}",
        "name": subnet["name"],
        "type": SUBNET_TYPE,
        "properties": json.loads(json.dumps(subnet["properties"])),
    }


def _strip_secrets(props: dict[str, Any]) -> dict[str, Any]:
    # Never echo secrets: ARM does not return adminPassword or customData.
    stored = json.loads(json.dumps(props))
    os_profile = stored.get("osProfile")
    if isinstance(os_profile, dict):
        os_profile.pop("adminPassword", None)
        os_profile.pop("customData", None)
    return stored


def _deletes(props: dict[str, Any] | None) -> bool:
    return str((props or {}).get("deleteOption", "Detach")).lower() == "delete"


def _in_use(resource: _Resource) -> ArmError:
    if resource.type == NIC_TYPE:
        return ArmError(
            400,
            "NicInUse",
            f"Network Interface {resource.id} is used by existing resource {resource.owner}. "
            "In order to delete the network interface, it must be dissociated from the resource.",
        )
    if resource.type == IP_TYPE:
        return ArmError(
            400,
            "PublicIPAddressCannotBeDeleted",
            f"Public IP address {resource.id} can not be deleted since it is still allocated to "
            f"resource {resource.owner}.",
        )
    return ArmError(
        409, "OperationNotAllowed", f"Disk {resource.name} is attached to VM {resource.owner}."
    )


def _sim_vm_json(vm: SimVm) -> dict[str, Any]:
    return {
        "cloud_id": vm.cloud_id,
        "name": vm.name,
        "region": vm.region,
        "state": vm.state,
        "tags": dict(vm.tags),
        "spot": vm.spot,
    }


def _server_error(request: Request) -> ArmError:
    """ARM's 5xx: a read is unavailable, a write failed inside."""
    if request.method == "GET":
        return ArmError(
            503, "ServiceUnavailable", "The service is temporarily unavailable. Please retry later."
        )
    return ArmError(
        500, "InternalServerError", "An internal execution error occurred. Retry later."
    )


def _error(error: ArmError) -> Response:
    response = _json({"error": error.as_json()}, error.status)
    for name, value in error.headers.items():
        response.headers[name.replace("_", "-")] = value
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return response


# -- launch configs the sim accepts ------------------------------------------------------------


def default_subnet_id(
    subscription_id: str = DEFAULT_SUBSCRIPTION_ID, resource_group: str = DEFAULT_RESOURCE_GROUP
) -> str:
    """The id of the default subnet, which every resource group of the sim holds."""
    return (
        f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
        f"{VNET_TYPE}/{DEFAULT_VNET}/subnets/{DEFAULT_SUBNET}"
    )


def image_reference(image: str) -> dict[str, str]:
    """An ARM imageReference from a resource id or a `publisher:offer:sku:version` URN."""
    if image.startswith("/"):
        return {"id": image}
    parts = image.split(":")
    if len(parts) == 4 and all(parts):
        return dict(zip(("publisher", "offer", "sku", "version"), parts, strict=True))
    raise ValueError(
        f"image {image!r} is neither an ARM resource id nor publisher:offer:sku:version"
    )


def example_launch_config(
    location: str,
    *,
    vm_size: str = "Standard_D2s_v3",
    image: str | None = None,
    spot: bool = False,
    public_ip: bool = False,
    subnet_id: str | None = None,
    capacity: int = 1,
    launch_config_id: str | None = None,
    weight: float | None = None,
    max_capacity: int | None = None,
    worker_config: Mapping[str, Any] | None = None,
    subscription_id: str | None = None,
    resource_group: str | None = None,
) -> dict[str, Any]:
    """A Taskcluster Azure launch config (resource form, config-azure.yml) that the sim
    launches as it is: the default subnet of `resource_group` in `subscription_id` (the demo
    provider's by default) unless `subnet_id`, a marketplace image the sim knows unless
    `image` (a URN or an image id; an id must be registered), a Standard SSD OS disk.

    `spot` makes it a Spot VM as worker pools write it (priority Spot, evicted by deletion,
    any price); `weight` is `workerManager.initialWeight` (0..1)."""
    subnet = subnet_id or default_subnet_id(
        subscription_id or DEFAULT_SUBSCRIPTION_ID, resource_group or DEFAULT_RESOURCE_GROUP
    )
    manager = worker_manager(
        capacity=capacity,
        launch_config_id=launch_config_id,
        weight=weight,
        max_capacity=max_capacity,
        publicIp=public_ip,
    )
    config: dict[str, Any] = {
        "location": location,
        "subnetId": subnet,
        "hardwareProfile": {"vmSize": vm_size},
        "storageProfile": {
            "imageReference": image_reference(image or DEFAULT_IMAGE),
            "osDisk": {
                "createOption": "FromImage",
                "caching": "ReadWrite",
                "managedDisk": {"storageAccountType": "StandardSSD_LRS"},
            },
        },
    }
    if spot:
        config.update(SPOT_AZURE)  # Deallocate: an evicted VM stays listed, the scan sees why
    config["workerConfig"] = dict(worker_config or {})
    config["workerManager"] = manager
    return config


def serve(config: SimCloudConfig, state_dir: Path) -> SimArm:
    """Start the simulated ARM for `wmsim serve`; its TLS certificate and the root of its
    attested data go into state_dir."""
    sim = SimArm(Behaviour.from_config(config), port=config.port, cert_dir=state_dir).start()
    _ = sim.identity_trust_path  # written now, so a config can name it before any worker boots
    return sim
