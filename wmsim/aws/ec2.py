"""Simulated EC2: moto's server behind a middleware that adds what moto lacks.

moto speaks the EC2 Query API (the real boto3 talks to it unchanged) but has no boot or delete
times, no faults, no quotas, and pages DescribeInstances by reservation. The middleware in front
of it, in the same process, adds:

- faults: every EC2 request is counted and passed through `Faults.before`; throttles and 5xx
  are answered in EC2's own XML error shape, so botocore raises what it raises against AWS;
- lifecycle: instance states are set in moto's models lazily on each request, from the
  creation and termination times this module remembers (pending -> running, shutting-down ->
  terminated);
- rate limit: RunInstances draws MaxCount from the behaviour's create-rate bucket (EC2's
  resource-rate bucket) and is refused with RequestLimitExceeded when the bucket holds fewer;
- quota: RunInstances beyond `quota_instances` live instances fails with InstanceLimitExceeded,
  or launches fewer than MaxCount when at least MinCount fit (as EC2 does);
- paging: DescribeInstances pages count instances, capped at the request's MaxResults and the
  behaviour's page_size_max, with EC2's 5..1000 bounds;
- idempotency: a RunInstances repeating a ClientToken that already launched gets the first
  call's answer and launches nothing (moto ignores ClientToken); with other parameters it is
  refused with IdempotentParameterMismatch, as EC2 does;
- refusals: RunInstances is refused, in EC2's XML error shape and with EC2's codes, where EC2
  refuses and moto would launch (`run_instances_refusal`): an unknown image, key pair,
  security group (or one of another VPC than the subnet), instance profile, a malformed spot
  block, a value outside EC2's enumerations, bad tag specifications, user data over 16 KiB;
  moto itself refuses unknown subnets and security group ids. Only the images in
  `KNOWN_IMAGES` exist, and those given to `register_image`; key pairs, VPCs, subnets,
  security groups and instance profiles are made with the SDK, as on AWS;
- record: every RunInstances past the faults is kept with its parameters decoded into the
  dict boto3 takes (`launch_requests`, GET /_sim/launch-requests), so tests compare what
  reached the cloud with the launch config it came from;
- isolation: each SimEc2 in a process has its own moto account, so two sims never share state;
- speed: moto's per-resource tag lookup scans every tag in the region (N^2 for a describe); the
  sim swaps in a dict lookup with the same answers, and drops moto's 1,301 public AMIs, which
  every new instance would otherwise scan. `seed_instances` makes large fleets in-process.
  A request's lifecycle sync touches only the instances due to change (`_sync`), and a
  DescribeInstances page is built from each instance's XML as moto last rendered it, until
  the instance changes (wmsim/aws/pages.py): the sim's cost of a request is what changed, not
  the fleet, so a benchmark's listing measures the client, not moto.

Control endpoints for other processes live under /_sim/ (see `_control`); they are neither
counted nor faulted. Besides the common ones, POST /_sim/outcomes {"outcomes": ["throttle"]}
forces the outcome of the next requests (`queue_outcomes`); GET /_sim/launch-requests lists the
recorded RunInstances; POST /_sim/images {"image_id", "region"?} registers an image. POST
/moto-api/reset resets this sim only.

`example_launch_config` builds a Taskcluster AWS launch config the sim launches as it is.

Metadata: every instance's IMDSv2 is served at /_vm/<instance id>/latest/... (see
wmsim/metadata.py for the addressing and wmsim/aws/imds.py for the paths): its user data as
launched, its signed identity document, meta-data, and a spot interruption notice two minutes
before a pre-emption. That is what the simulated worker-runner reads.

Identity (older tests): GET /_sim/identity/<instance id> answers {"document", "signature"} for a
live instance, as its instance metadata service would (instance-identity/document and /signature),
signed with the sim's own RSA key; `identity_trust_path` is the certificate to trust for it
(the provider config's `identity_certificate`), and `mint_identity` makes forgeries for tests.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import decimal
import heapq
import io
import json
import re
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape

from wmsim import metadata
from wmsim.aws import imds as imds_ec2
from wmsim.aws import pages
from wmsim.behaviour import (
    Behaviour,
    Faults,
    Outcome,
    Preemptions,
    SimVm,
    digest,
    lifecycle_state,
)
from wmsim.cloud import SimCloudConfig
from wmsim.launch_configs import worker_manager
from wmsim.trust import TrustDir, pem, self_signed, signing_key
from wmsim.wsgi import ServerThread

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import rsa

FIRST_ACCOUNT_ID = 123456789012  # moto's default account: what `wmsim serve` users see
DEFAULT_REGION = "us-east-1"
TERMINATED_VISIBLE_S = 3600.0  # EC2 keeps terminated instances listed for about an hour
MAX_RESULTS_MIN, MAX_RESULTS_MAX = 5, 1000  # DescribeInstances MaxResults bounds on AWS
UNBOUNDED_MAX_RESULTS = 2**31 - 1  # what the middleware asks of moto once it chose a page
# The parameters of a DescribeInstances whose answer the sim may build from the parts moto
# rendered before (anything else, DryRun say, is moto's to answer).
PLAIN_LISTING = re.compile(r"Action|Version|MaxResults|NextToken|InstanceId\.\d+|Filter\..+")
MUTATING_ACTIONS = frozenset(
    {"RunInstances", "TerminateInstances", "StopInstances", "StartInstances", "RebootInstances"}
)

# moto instance state name -> (EC2 state code, SimVm state)
MOTO_STATES = {
    "pending": (0, "pending"),
    "running": (16, "running"),
    "shutting-down": (32, "stopping"),
    "terminated": (48, "gone"),
    "stopping": (64, "stopping"),
    "stopped": (80, "stopped"),
}
EC2_API_VERSION = "2016-11-15"  # what botocore sends as Version
IDENTITY_KEY_NAME = "ec2-identity"
IDENTITY_TRUST_FILE = "ec2-identity-certificate.pem"
IDENTITY_DOCUMENT_VERSION = "2017-09-30"
IDENTITY_STATES = frozenset({"pending", "running", "stopping", "stopped", "shutting-down"})
# Instances whose OS has booted and not yet stopped, so whose metadata service answers.
METADATA_STATES = frozenset({"running", "stopping", "shutting-down"})
# The images every region of the sim holds (moto's public ones are dropped for speed): the
# defaults of `example_launch_config` and of seeding, and the ids the demo and tests launch.
# Any other image is registered with `register_image` (or POST /_sim/images).
KNOWN_IMAGES = (
    "ami-0abcdef1234567890",
    "ami-0123456789abcdef0",
    "ami-0fedcba9876543210",
    "ami-0a1b2c3d4e5f60718",
)
DEFAULT_IMAGE = KNOWN_IMAGES[0]
USER_DATA_MAX_BYTES = 16384  # EC2's limit on user data, before base64
IMAGE_ROOT_VOLUME_GIB = 8  # the root volume of the sim's images
LAUNCH_REQUESTS_KEPT = 100_000  # RunInstances records kept (the oldest go first)
SPOT_TERMINATION = ("Server.SpotInstanceTermination", "Spot instance termination")
INTERNAL_ERROR = ("Server.InternalError", "Internal error")

_accounts_lock = threading.Lock()
_accounts_in_use: set[str] = set()
_tag_lookup_patched = False

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass
class _Life:
    """What the sim remembers about one instance to derive its state."""

    seq: int  # creation order: DescribeInstances pages follow it
    created_at: float
    deleted_at: float | None = None  # TerminateInstances (or a kill) seen
    gone_at: float | None = None  # reached terminated
    pinned: str | None = None  # a state set out of band (kill); lifecycle leaves it alone


@dataclass(frozen=True)
class _Listing:
    """One region's instances matching one set of filters, in creation order, computed once
    for every page of a listing (moto would filter every instance of the region per page)."""

    generation: int
    seqs: list[int]  # the instances' creation sequence, ascending (page tokens resume on it)
    instances: list[Any]
    reservation_of: dict[str, Any]  # instance id -> its moto reservation
    order: dict[str, int]  # reservation id -> its place in moto's reservations


@dataclass(frozen=True)
class _Answer:
    status: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class LaunchRequest:
    """One RunInstances that reached the simulated cloud (past the injected faults)."""

    region: str
    # The parameters as boto3 takes them, decoded from the Query API form with EC2's service
    # model; UserData decoded from base64 to its text. Empty lists and structures are absent:
    # they do not travel on the wire.
    parameters: dict[str, Any]
    error: str | None  # EC2's error code when it was refused
    instance_ids: tuple[str, ...]  # what it launched (or, replayed by ClientToken, launched first)


class SimEc2:
    """moto's EC2 on 127.0.0.1 with latency, faults, quotas, lifecycle and instance paging."""

    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        port: int = 0,
        seed: int | None = None,
        terminated_visible_s: float = TERMINATED_VISIBLE_S,
        trust_dir: Path | None = None,
    ) -> None:
        self.faults = Faults(behaviour, seed=seed)
        self.preemptions = Preemptions(self.faults)
        self._initial_behaviour = self.faults.behaviour.as_dict()  # what reset() goes back to
        self.terminated_visible_s = terminated_visible_s
        self.account_id = _claim_account()
        self._port = port
        self._lock = threading.RLock()
        self._life: dict[str, _Life] = {}
        self._seq = 0
        # Where each instance lives, as of the last sync: a metadata request or a describe by id
        # finds its instance without going over the fleet.
        self._where: dict[str, tuple[str, Any]] = {}
        # When each instance's simulated state next changes (boot, delete, drop from listings),
        # a heap of (time, instance id) with the time kept in `_next_at`: a sync touches only the
        # instances due, so a request costs what changed, not the fleet (`_sync`).
        self._due: list[tuple[float, str]] = []
        self._next_at: dict[str, float] = {}
        # Set when moto's models may hold instances or states the sim has not seen (any request
        # moto carried out other than a describe, seeding, a kill): the next sync reads them all.
        self._unseen = True
        self._synced_timing: tuple[float, float, float] | None = None
        # Each instance's signed identity proof, as its metadata service serves it: its document
        # changes only through a request (`_touched` forgets them all), and signing one takes
        # as long as the rest of a metadata request.
        self._proofs: dict[str, dict[str, str]] = {}
        # DescribeInstances pages built from the parts of moto's earlier answers (wmsim/aws/
        # pages.py): each instance's <item> with the state it was rendered in (an instance
        # whose state moved since is rendered again), each reservation's opening and closing,
        # and an answer's status, headers, opening and closing. `_touched` forgets them.
        self.page_cache = True
        self._items: dict[str, tuple[str, bytes]] = {}
        self._reservation_parts: dict[str, tuple[bytes, bytes]] = {}
        self._page_frame: tuple[str, list[tuple[str, str]], bytes, bytes] | None = None
        # Moves whenever an instance, its state or its tags may have changed: a listing computed
        # at one generation answers every page of that generation (`_listing`).
        self._generation = 0
        self._listings: dict[tuple[str, str], _Listing] = {}
        self._prepared: set[int] = set()  # ids of region backends already made lean
        self._fail_count = 0
        # ClientToken -> (digest of the RunInstances parameters, the answer it got)
        self._client_tokens: dict[str, tuple[str, _Answer]] = {}
        self._launch_requests: deque[LaunchRequest] = deque(maxlen=LAUNCH_REQUESTS_KEPT)
        self._moto: WsgiApp | None = None
        self._server: ServerThread | None = None
        self._trust = TrustDir(trust_dir, "wm-sim-ec2-")
        self._identity_path: Path | None = None
        self._imds_tokens = imds_ec2.Ec2Tokens()

    # --- lifecycle of the sim itself -------------------------------------------------------

    def start(self) -> SimEc2:
        from moto.server import DomainDispatcherApplication, create_backend_app

        _speed_up_moto_tag_lookup()
        _skip_public_amis()
        self._moto = DomainDispatcherApplication(create_backend_app)
        self._warm()
        self._server = ServerThread(self._app, port=self._port).start()
        return self

    def _warm(self) -> None:
        """Answer a listing and a launch once, then forget them. moto builds its EC2 models and
        response templates on a process's first request (~0.45 s): paid here, a client's first
        call costs what later ones do, and a benchmark's first run does not measure the sim
        waking up as the latency of the process under test."""
        environ = _moto_environ(DEFAULT_REGION, self.account_id)
        version = {"Version": EC2_API_VERSION}
        launch = {"ImageId": DEFAULT_IMAGE, "MinCount": "1", "MaxCount": "1"}
        with self._lock:
            self._prepare_region(DEFAULT_REGION)
            self._describe_instances(
                environ, {"Action": "DescribeInstances", **version}, DEFAULT_REGION
            )
            self._run_instances(
                environ, {"Action": "RunInstances", **version, **launch}, DEFAULT_REGION
            )
            self._drop_moto_state()

    def stop(self) -> None:
        self.faults.cut_hangs()
        if self._server is not None:
            self._server.stop()
            self._server = None
        with self._lock:
            self._drop_moto_state()
            self._identity_path = None
        self._trust.cleanup()
        _release_account(self.account_id)

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() the sim first"
        return self._server.base_url

    def reset(self) -> None:
        """Forget every instance and moto's state for this sim; zero the counters and restore the
        behaviour the sim started with."""
        self.faults.cut_hangs()
        with self._lock:
            self._drop_moto_state()
        self.preemptions.clear()
        self.faults.reset_counts()
        self.faults.behaviour.update(**self._initial_behaviour)

    # --- inspection and out-of-band events -------------------------------------------------

    def instances(self) -> list[SimVm]:
        self._preempt_due()
        with self._lock:
            self._sync(time.monotonic())
            return [_sim_vm(region, inst) for region, inst in self._all_instances()]

    def kill(
        self, cloud_id_or_name: str, reason: str = "preempted", state: str | None = None
    ) -> None:
        """The instance dies out of band: a spot instance is terminated with EC2's spot reason,
        another is stopped (or `state`) with Server.InternalError."""
        with self._lock:
            _region, inst = self._find(cloud_id_or_name)
            spot = inst.lifecycle == "spot"
            code, message = _kill_reason(reason, spot)
            final = state or ("terminated" if spot else "stopped")
            if final == "terminated":
                inst.terminate()
            elif final == "stopped":
                inst.stop()
            else:
                raise ValueError(f"kill state must be terminated or stopped, not {final!r}")
            _set_state(inst, final)
            _set_reason(inst, code, message)
            self._touched(only=[inst.id])
            now = time.monotonic()
            life = self._life[inst.id]
            life.pinned = final
            if final == "terminated":
                life.deleted_at = life.deleted_at or now
                life.gone_at = life.gone_at or now

    def _preempt_due(self) -> None:
        """Pre-empt the spot instances whose time has come (Behaviour.preempt_share)."""
        for instance_id in self.preemptions.due():
            with contextlib.suppress(KeyError):
                self.kill(instance_id, "preempted")

    def remove(self, cloud_id_or_name: str) -> None:
        """The instance vanishes, as if deleted by hand long ago: no describe shows it again."""
        with self._lock:
            region, inst = self._find(cloud_id_or_name)
            if inst.state != "terminated":
                inst.terminate()
            self._drop_instance(self._backend(region), inst)

    def seed_instances(
        self,
        count: int,
        *,
        region: str = DEFAULT_REGION,
        tags: dict[str, str] | None = None,
        instance_type: str = "m5.large",
        image: str = "ami-0123456789abcdef0",
    ) -> list[str]:
        """Create `count` instances in one reservation in-process, as one RunInstances would,
        without an API request (nothing counted): moto's XML costs about 1 ms per instance, so
        large fleets for scale tests and benchmarks are seeded this way. Returns their ids.

        Seeding takes time linear in `count` however many instances the region holds (moto's
        own RunInstances scans every instance and volume of the region for each new one)."""
        with self._lock:
            self._prepare_region(region)
            backend = self._backend(region)
            with _new_instances_found_fast(backend):
                reservation = backend.run_instances(
                    image,
                    count,
                    None,
                    [],
                    instance_type=instance_type,
                    is_instance_type_default=False,
                    region_name=region,
                    tags={"instance": dict(tags or {}), "volume": dict(tags or {})},
                )
            self._touched(only=[])  # new instances (and their volumes) only
            self._sync(time.monotonic())
            self._render_ahead(region, reservation)
            return [inst.id for inst in reservation.instances]

    def queue_outcomes(self, *outcomes: Outcome | str) -> None:
        """Force the outcome of the next EC2 requests, one each, whatever the behaviour says:
        a counted burst (e.g. two throttles, then normal service) without relying on chance."""
        self.faults.force(*outcomes)

    def register_image(self, image_id: str, region: str = DEFAULT_REGION) -> None:
        """Make an image exist in a region, so that RunInstances accepts it (any id, even one
        EC2 would call malformed, as Taskcluster's fixtures use)."""
        with self._lock:
            self._prepare_region(region)
            _add_image(self._backend(region), region, image_id)

    def add_subnet(self, subnet_id: str, availability_zone: str) -> None:
        """Make a subnet of the region's default VPC with the id given (a real deployment's
        `subnet-…`, which EC2 chose when it was made and a launch config names), so that
        RunInstances accepts it. EC2 and moto choose subnet ids themselves; the sim takes one."""
        region = availability_zone[:-1]
        with self._lock:
            self._prepare_region(region)
            backend = self._backend(region)
            if any(subnet_id in subnets for subnets in backend.subnets.values()):
                return
            vpc = backend.get_default_vpc()
            taken = sum(len(subnets) for subnets in backend.subnets.values())
            # The default VPC is 172.31.0.0/16 with a /20 per zone from the bottom: from the
            # top half, a /24 each.
            cidr = f"172.31.{128 + taken % 128}.0/24"
            with _given_id("moto.ec2.models.subnets", "random_subnet_id", subnet_id):
                backend.create_subnet(vpc.id, cidr, availability_zone=availability_zone)

    def add_security_group(self, group_id: str, region: str) -> None:
        """Make a security group of the region's default VPC with the id given (a real
        deployment's `sg-…`), named after it. EC2 and moto choose group ids; the sim takes one."""
        with self._lock:
            self._prepare_region(region)
            backend = self._backend(region)
            if backend.get_security_group_from_id(group_id) is not None:
                return
            with _given_id("moto.ec2.models.security_groups", "random_security_group_id", group_id):
                backend.create_security_group(group_id.removeprefix("sg-"), f"seeded {group_id}")

    def launch_requests(self) -> list[LaunchRequest]:
        """Every RunInstances that reached the cloud, oldest first (what a test compares with
        the launch config it came from)."""
        with self._lock:
            return list(self._launch_requests)

    # --- identity documents ----------------------------------------------------------------

    @property
    def identity_trust_path(self) -> Path:
        """PEM of the certificate the sim signs identity documents with."""
        with self._lock:
            if self._identity_path is None:
                path = self._trust.path(IDENTITY_TRUST_FILE)
                path.write_bytes(pem(_identity_certificate()))
                self._identity_path = path
            return self._identity_path

    def identity_document(self, instance_id: str) -> dict[str, Any]:
        """The instance's identity document fields, as IMDS reports them."""
        with self._lock:
            region, inst = self._find(instance_id)
            if inst.state not in IDENTITY_STATES:
                raise KeyError(f"instance {instance_id!r} is gone: it has no metadata service")
            return {
                "accountId": self.account_id,
                "architecture": getattr(inst, "architecture", None) or "x86_64",
                "availabilityZone": inst.placement.zone,
                "billingProducts": None,
                "devpayProductCodes": None,
                "marketplaceProductCodes": None,
                "imageId": inst.image_id,
                "instanceId": inst.id,
                "instanceType": inst.instance_type,
                "kernelId": None,
                "pendingTime": inst.launch_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "privateIp": inst.private_ip,
                "ramdiskId": None,
                "region": region,
                "version": IDENTITY_DOCUMENT_VERSION,
            }

    def identity_proof(self, instance_id: str) -> dict[str, str]:
        """What the instance's worker posts to register: {"document", "signature"}."""
        return self.mint_identity(instance_id)

    def mint_identity(
        self,
        instance_id: str,
        *,
        changes: Mapping[str, Any] | None = None,
        key: rsa.RSAPrivateKey | None = None,
    ) -> dict[str, str]:
        """A proof for the instance with `changes` made to the document before it is signed,
        signed with `key` instead of the sim's: forgeries for tests."""
        document = {**self.identity_document(instance_id), **(changes or {})}
        return sign_identity_document(document, key or signing_key(IDENTITY_KEY_NAME))

    # --- instance metadata (IMDSv2) ----------------------------------------------------------

    def metadata_view(self, instance_id: str) -> imds_ec2.Ec2VmView:
        """What the instance's metadata service serves; KeyError when it has none (unknown,
        not booted yet, stopped or gone)."""
        with self._lock:
            region, inst = self._find(instance_id)
            if inst.id != instance_id or inst.state not in METADATA_STATES:
                raise KeyError(instance_id)
            proof = self._proofs.get(inst.id)
            if proof is None:
                proof = self._proofs[inst.id] = self.identity_proof(inst.id)
            user_data = _user_data(inst)
            return imds_ec2.Ec2VmView(
                instance_id=inst.id,
                region=region,
                availability_zone=inst.placement.zone,
                image_id=inst.image_id,
                instance_type=inst.instance_type,
                launch_index=int(getattr(inst, "ami_launch_index", 0) or 0),
                private_ip=inst.private_ip or "",
                private_hostname=inst.private_dns_name,
                public_ip=inst.public_ip or None,
                public_hostname=inst.public_dns_name or None,
                spot=inst.lifecycle == "spot",
                user_data=user_data,
                document=proof["document"],
                signature=proof["signature"],
                interruption_at=metadata.announced(
                    self.preemptions.due_at(inst.id), imds_ec2.SPOT_NOTICE_S
                ),
            )

    def _metadata(self, environ: dict[str, Any], key: str, path: str) -> metadata.MetaAnswer:
        try:
            view = self.metadata_view(key)
        except KeyError:
            return metadata.not_found()
        method = environ.get("REQUEST_METHOD", "GET")
        return imds_ec2.answer(view, self._imds_tokens, method, path, metadata.headers_of(environ))

    # --- the WSGI app ----------------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        self._preempt_due()
        path = environ.get("PATH_INFO", "")
        if (vm := metadata.vm_path(path)) is not None:
            return metadata.respond(start_response, self._metadata(environ, *vm))
        if path.startswith("/_sim/"):
            return _respond(start_response, self._control(environ, path))
        if path.startswith("/moto-api/reset"):
            self.reset()
            return _respond(start_response, _json_answer({"status": "ok"}))
        if path.startswith("/moto-api"):
            with self._lock:
                self._touched()
            return self._forward(environ, start_response)
        body = _read_body(environ)
        params = dict(
            # Blank values are parameters too (a tag whose value is empty).
            parse_qsl(body.decode() or environ.get("QUERY_STRING", ""), keep_blank_values=True)
        )
        action = params.get("Action")
        if not action:
            with self._lock:
                self._touched()
            return self._forward(environ, start_response)
        if action == "RunInstances":
            outcome = self.faults.before(
                action,
                key=params.get("ClientToken"),
                params=_launch_params(params),
                vms=_int_param(params, "MaxCount", 1),
            )
        else:
            outcome = self.faults.before(action)
        if outcome not in (Outcome.OK, Outcome.LOST):
            return _respond(start_response, self._fault_answer(outcome))
        # moto picks the account from this header; it keeps sims in one process apart.
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = self.account_id
        region = _region_of(environ)
        with self._lock:
            self._prepare_region(region)
            self._sync(time.monotonic())
            if action == "DescribeInstances":
                answer = self._describe_instances(environ, params, region)
            elif action == "RunInstances":
                answer = self._run_instances(environ, params, region)
            else:
                answer = self._call_moto(environ, params)
            if action == "RunInstances":
                self._touched(only=[])  # new instances only: the others render as they did
            elif action != "DescribeInstances":
                self._touched()  # tags, states, instances: anything may have moved
            if action in MUTATING_ACTIONS:
                self._sync(time.monotonic())
        if outcome is Outcome.LOST:  # carried out; the client never hears of it
            self.faults.hold_lost_answer()
            answer = self._fault_answer(Outcome.FAIL)
        return _respond(start_response, answer)

    def _fault_answer(self, outcome: Outcome) -> _Answer:
        behaviour = self.faults.behaviour
        if outcome is Outcome.THROTTLE:
            headers = []
            if behaviour.retry_after_s is not None:
                headers.append(("Retry-After", f"{behaviour.retry_after_s:g}"))
            return _ec2_error(503, "RequestLimitExceeded", "Request limit exceeded.", headers)
        # EC2 answers server faults both ways; alternate so clients meet both.
        self._fail_count += 1
        if self._fail_count % 2:
            return _ec2_error(500, "InternalError", "An internal error has occurred.")
        return _ec2_error(503, "Unavailable", "The service is unavailable. Try again shortly.")

    def _forward(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        assert self._moto is not None
        return self._moto(environ, start_response)

    def _call_moto(self, environ: dict[str, Any], params: dict[str, str]) -> _Answer:
        assert self._moto is not None
        encoded = urlencode(params).encode()
        environ = dict(environ)
        environ["REQUEST_METHOD"] = "POST"
        environ["QUERY_STRING"] = ""
        environ["CONTENT_TYPE"] = "application/x-www-form-urlencoded; charset=utf-8"
        environ["CONTENT_LENGTH"] = str(len(encoded))
        environ["wsgi.input"] = io.BytesIO(encoded)
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            captured["status"], captured["headers"] = status, headers

        chunks = self._moto(environ, capture)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close:
                close()
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        return _Answer(captured["status"], headers, body)

    # --- actions the sim shapes itself -----------------------------------------------------

    def _run_instances(
        self, environ: dict[str, Any], params: dict[str, str], region: str
    ) -> _Answer:
        request = decode_query("RunInstances", params)
        answer = self._run_instances_answer(environ, params, request, region)
        self._launch_requests.append(
            LaunchRequest(region, _readable(request), _error_code(answer), _instance_ids(answer))
        )
        return answer

    def _run_instances_answer(
        self, environ: dict[str, Any], params: dict[str, str], request: dict[str, Any], region: str
    ) -> _Answer:
        token = params.get("ClientToken")
        if token and token in self._client_tokens:
            first_digest, first_answer = self._client_tokens[token]
            if first_digest != digest(_launch_params(params)):
                return _ec2_error(
                    400,
                    "IdempotentParameterMismatch",
                    "The client token you have provided is associated with a resource that is "
                    "already deleted or with different parameters.",
                )
            return first_answer
        refusal = run_instances_refusal(self._backend(region), request)
        if refusal is not None:
            return _ec2_error(400, *refusal)
        answer = self._launch(environ, params, region)
        if token and answer.status.startswith("200"):
            self._client_tokens[token] = (digest(_launch_params(params)), answer)
        return answer

    def _launch(self, environ: dict[str, Any], params: dict[str, str], region: str) -> _Answer:
        wanted_min = int(params.get("MinCount", "1"))
        wanted_max = int(params.get("MaxCount", str(wanted_min)))
        launch = wanted_max
        quota = self.faults.behaviour.quota_instances
        if quota is not None:
            live = sum(
                1
                for r, inst in self._all_instances()
                if r == region and inst.state not in ("stopped", "terminated")
            )
            room = max(0, quota - live)
            if room < wanted_min:
                return _ec2_error(
                    400,
                    "InstanceLimitExceeded",
                    f"You have requested more instances ({live + wanted_min}) than your current "
                    f"instance limit of {quota} allows for the specified instance type. Please "
                    "visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment "
                    "to this limit.",
                )
            launch = min(wanted_max, room)
        # moto launches MinCount instances; EC2 launches as many up to MaxCount as fit.
        return self._call_moto(
            environ,
            {**_moto_form(params), "MinCount": str(launch), "MaxCount": str(launch)},
        )

    def _describe_instances(
        self, environ: dict[str, Any], params: dict[str, str], region: str
    ) -> _Answer:
        ids = [v for k, v in params.items() if k.startswith("InstanceId.")]
        if ids and "MaxResults" in params:
            return self._call_moto(environ, params)  # moto answers InvalidParameterCombination
        limit = self.faults.behaviour.page_size_max
        if "MaxResults" in params:
            try:
                asked = int(params["MaxResults"])
            except ValueError:
                asked = -1
            if not MAX_RESULTS_MIN <= asked <= MAX_RESULTS_MAX:
                return _ec2_error(
                    400,
                    "InvalidParameterValue",
                    f"Value ( {params['MaxResults']} ) for parameter maxResults is invalid. "
                    f"Expecting a value between {MAX_RESULTS_MIN} and {MAX_RESULTS_MAX}.",
                )
            limit = asked if limit is None else min(limit, asked)
        filters = _filters(params)
        try:
            listing = self._listing(region, filters)
        except NotImplementedError:
            names = ", ".join(sorted(filters))
            return _ec2_error(400, "InvalidParameterValue", f"The filter '{names}' is invalid")
        matched = listing.instances
        first = 0
        if ids:
            missing = [i for i in ids if i not in self._where or self._where[i][0] != region]
            if missing:
                return _not_found(missing)
            # The listing's instances among those asked for, in its order, without going over
            # the listing (the old scanner's one-instance describes).
            matched = sorted(
                (self._where[i][1] for i in set(ids) if i in listing.reservation_of),
                key=lambda inst: self._life[inst.id].seq,
            )
        after = _token_seq(params.get("NextToken"))
        if after is None:
            return _ec2_error(400, "InvalidPaginationToken", "The pagination token is invalid.")
        if ids:
            matched = [inst for inst in matched if self._life[inst.id].seq > after]
        else:
            first = bisect.bisect_right(listing.seqs, after)
        page = matched[first:] if limit is None else matched[first : first + limit]
        more = len(page) < len(matched) - first
        rest = {
            k: v
            for k, v in params.items()
            if not k.startswith("InstanceId.") and k not in ("MaxResults", "NextToken")
        }
        rest["MaxResults"] = str(UNBOUNDED_MAX_RESULTS)
        answer = self._render(environ, rest, region, page, listing)
        if more and answer.status.startswith("200"):
            token = _make_token(self._life[page[-1].id].seq)
            closing = b"</DescribeInstancesResponse>"
            body = answer.body.replace(
                closing, f"<nextToken>{token}</nextToken>".encode() + closing
            )
            answer = _Answer(answer.status, answer.headers, body)
        return answer

    def _listing(self, region: str, filters: dict[str, list[str]]) -> _Listing:
        """The region's instances matching the filters in creation order: moto filters them
        once per generation, not once per page."""
        key = (region, json.dumps(filters, sort_keys=True))
        cached = self._listings.get(key)
        if cached is not None and cached.generation == self._generation:
            return cached
        backend = self._backend(region)
        reservations = backend.describe_instances(filters=filters)
        reservation_of = {inst.id: r for r in reservations for inst in r.instances}
        instances = sorted(
            (inst for r in reservations for inst in r.instances),
            key=lambda inst: self._life[inst.id].seq,
        )
        listing = _Listing(
            self._generation,
            [self._life[inst.id].seq for inst in instances],
            instances,
            reservation_of,
            {rid: place for place, rid in enumerate(backend.reservations)},
        )
        self._listings[key] = listing
        return listing

    def _render(
        self,
        environ: dict[str, Any],
        params: dict[str, str],
        region: str,
        page: list[Any],
        listing: _Listing,
    ) -> _Answer:
        """The answer for this page's instances: built from the parts of moto's earlier
        answers where it has them all (an instance's item is moto's as long as the instance is
        unchanged), else moto's own for the instances it lacks, kept for the next pages."""
        if not (page and self.page_cache and all(PLAIN_LISTING.fullmatch(k) for k in params)):
            return self._render_by_moto(environ, params, region, page, listing)
        stale = [inst for inst in page if not self._has_parts(inst, listing)]
        if stale:
            answer = self._render_by_moto(environ, params, region, stale, listing)
            if not answer.status.startswith("200"):
                return answer
            self._keep_parts(answer, stale)
            if len(stale) == len(page):
                return answer
            if not all(self._has_parts(inst, listing) for inst in page):
                return self._render_by_moto(environ, params, region, page, listing)
        return self._join_parts(page, listing)

    def _has_parts(self, inst: Any, listing: _Listing) -> bool:
        item = self._items.get(inst.id)
        return (
            item is not None
            and item[0] == inst.state
            and listing.reservation_of[inst.id].id in self._reservation_parts
        )

    def _keep_parts(self, answer: _Answer, rendered: list[Any]) -> None:
        parts = pages.split_page(answer.body)
        if parts is None:
            return
        self._page_frame = (answer.status, answer.headers, parts.head, parts.tail)
        states = {inst.id: inst.state for inst in rendered}
        for reservation in parts.reservations:
            self._reservation_parts[reservation.reservation_id] = (
                reservation.head,
                reservation.tail,
            )
            for instance_id, item in reservation.instances:
                if instance_id in states:
                    self._items[instance_id] = (states[instance_id], item)

    def _join_parts(self, page: list[Any], listing: _Listing) -> _Answer:
        """What moto answers for the page: its reservations in moto's order, each holding the
        page's instances in the reservation's order (as `_render_by_moto` shows them to moto)."""
        assert self._page_frame is not None
        wanted = {inst.id for inst in page}
        held = {
            listing.reservation_of[inst.id].id: listing.reservation_of[inst.id] for inst in page
        }
        reservations = []
        for reservation_id in sorted(held, key=listing.order.__getitem__):
            head, tail = self._reservation_parts[reservation_id]
            items = [self._items[i.id][1] for i in held[reservation_id].instances if i.id in wanted]
            reservations.append((head, items, tail))
        status, headers, head, tail = self._page_frame
        return _Answer(status, list(headers), pages.join_page(head, tail, reservations))

    def _render_ahead(self, region: str, reservation: Any) -> None:
        """Have moto render a new reservation's instances now, as the first listing would:
        seeding pays for it, so a benchmark's listing of a seeded fleet costs the sim what the
        cloud's answer costs (a seeded fleet is ready, as a real cloud's is), not moto's work."""
        if not self.page_cache or self._moto is None or not reservation.instances:
            return
        listing = _Listing(
            self._generation,
            [],
            list(reservation.instances),
            {inst.id: reservation for inst in reservation.instances},
            {reservation.id: 0},
        )
        environ = _moto_environ(region, self.account_id)
        params = {
            "Action": "DescribeInstances",
            "Version": EC2_API_VERSION,
            "MaxResults": str(UNBOUNDED_MAX_RESULTS),
        }
        self._render(environ, params, region, list(reservation.instances), listing)

    def _render_by_moto(
        self,
        environ: dict[str, Any],
        params: dict[str, str],
        region: str,
        page: list[Any],
        listing: _Listing,
    ) -> _Answer:
        """moto's own answer to the request, for this page's instances only: moto is shown
        just their reservations (holding just them), in its own order, so it renders a page
        without filtering every instance of the region again."""
        wanted = {inst.id for inst in page}
        held: dict[str, Any] = {}
        for inst in page:
            reservation = listing.reservation_of[inst.id]
            if reservation.id not in held:
                narrowed = copy.copy(reservation)
                narrowed.instances = [i for i in reservation.instances if i.id in wanted]
                held[reservation.id] = narrowed
        backend = self._backend(region)
        everything = backend.reservations
        backend.reservations = type(everything)(
            (rid, held[rid]) for rid in sorted(held, key=listing.order.__getitem__)
        )
        try:
            return self._call_moto(environ, params)
        finally:
            backend.reservations = everything

    # --- moto's models ---------------------------------------------------------------------

    def _backend(self, region: str) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.account_id][region]

    def _prepare_region(self, region: str) -> None:
        backend = self._backend(region)
        if id(backend) not in self._prepared:
            # A backend starts with no AMI (`_skip_public_amis`): the sim's own few are added.
            for image_id in KNOWN_IMAGES:
                _add_image(backend, region, image_id)
            self._prepared.add(id(backend))

    def _all_instances(self) -> Iterator[tuple[str, Any]]:
        from moto.ec2.models import ec2_backends

        if self.account_id not in ec2_backends:
            return
        for region, backend in list(ec2_backends[self.account_id].items()):
            for reservation in list(backend.reservations.values()):
                for inst in list(reservation.instances):
                    yield region, inst

    def _find(self, cloud_id_or_name: str) -> tuple[str, Any]:
        """The instance of that id, else the first whose Name tag it is."""
        self._sync(time.monotonic())
        where = self._where.get(cloud_id_or_name)
        if where is not None:
            return where
        for region, inst in self._all_instances():
            if _tags(inst).get("Name") == cloud_id_or_name:
                return region, inst
        raise KeyError(f"no instance {cloud_id_or_name!r}")

    def _touched(self, only: Iterable[str] | None = None) -> None:
        """moto's models may have changed: listings are computed again and the next sync
        reads every instance. `only`: the instances that changed (beside new ones), whose
        proofs and rendered items are forgotten; None (a request moto carried out): anything
        may have, so all are."""
        self._generation += 1
        self._unseen = True
        if only is None:
            self._proofs.clear()
            self._items.clear()
            self._reservation_parts.clear()
            return
        for instance_id in only:
            self._proofs.pop(instance_id, None)
            self._items.pop(instance_id, None)

    def _sync(self, now: float) -> None:
        """Bring moto's instance states in line with the simulated lifecycle.

        After a request that may have changed moto's models (`_touched`), or a change of the
        lifecycle's timings, every instance is read (`_sync_all`); otherwise only the instances
        whose state is due to change by now (`_due`): a describe or a metadata request costs
        what changed, not the fleet. Both bring each instance to the same state at `now`, because
        an instance's state changes only at the times `_next_change` gives."""
        behaviour = self.faults.behaviour
        timing = (behaviour.boot_s, behaviour.delete_s, self.terminated_visible_s)
        if self._unseen or timing != self._synced_timing:
            self._sync_all(now)
            self._synced_timing = timing
            self._unseen = False
            return
        changed = False
        while self._due and self._due[0][0] <= now:
            at, instance_id = heapq.heappop(self._due)
            if self._next_at.get(instance_id) != at:
                continue  # dropped, or rescheduled since
            del self._next_at[instance_id]
            region, inst = self._where[instance_id]
            changed |= self._sync_one(region, inst, self._life[instance_id], now)
        if changed:
            self._generation += 1

    def _sync_all(self, now: float) -> None:
        behaviour = self.faults.behaviour
        changed = False
        self._where = {}
        self._due, self._next_at = [], {}
        for region, inst in list(self._all_instances()):
            self._where[inst.id] = (region, inst)
            life = self._life.get(inst.id)
            if life is None:
                self._seq += 1
                life = self._life[inst.id] = _Life(self._seq, now)
                changed = True
                if inst.lifecycle == "spot":
                    self.preemptions.schedule(inst.id, now + behaviour.boot_s)
            changed |= self._sync_one(region, inst, life, now)
        for gone in set(self._life) - set(self._where):
            del self._life[gone]
            changed = True
        if changed:
            self._generation += 1

    def _sync_one(self, region: str, inst: Any, life: _Life, now: float) -> bool:
        """Bring one instance to its state at `now` and schedule its next change; whether its
        state changed."""
        behaviour = self.faults.behaviour
        changed = False
        if life.pinned is not None and inst.state != life.pinned:
            life.pinned = None  # changed through the API since (e.g. StartInstances)
        if life.pinned is None:
            if inst.state == "terminated" and life.deleted_at is None:
                life.deleted_at = now  # moto terminates at once; the sim makes it take time
            if life.deleted_at is not None or inst.state in ("pending", "running"):
                phase = lifecycle_state(
                    now, life.created_at, behaviour.boot_s, life.deleted_at, behaviour.delete_s
                )
                if inst.state != _PHASE_STATES[phase]:
                    _set_state(inst, _PHASE_STATES[phase])
                    changed = True
        if inst.state == "terminated":
            life.gone_at = life.gone_at or now
            if now >= life.gone_at + self.terminated_visible_s:
                self._drop_instance(self._backend(region), inst)
                return changed
        at = self._next_change(inst, life, now)
        if at is not None:
            self._next_at[inst.id] = at
            heapq.heappush(self._due, (at, inst.id))
        return changed

    def _next_change(self, inst: Any, life: _Life, now: float) -> float | None:
        """The first time after `now` at which `_sync_one` would change the instance, unless
        a request changes it first: the same sums `lifecycle_state` and the drop compare with."""
        behaviour = self.faults.behaviour
        times = []
        if life.pinned is None:
            if life.deleted_at is not None:
                times.append(life.deleted_at + behaviour.delete_s)
            elif inst.state in ("pending", "running"):
                times.append(life.created_at + behaviour.boot_s)
        if inst.state == "terminated" and life.gone_at is not None:
            times.append(life.gone_at + self.terminated_visible_s)
        later = [t for t in times if t > now]
        return min(later) if later else None

    def _drop_instance(self, backend: Any, inst: Any) -> None:
        for reservation_id, reservation in list(backend.reservations.items()):
            if inst in reservation.instances:
                reservation.instances.remove(inst)
                if not reservation.instances:
                    del backend.reservations[reservation_id]
        backend.tags.pop(inst.id, None)
        self._life.pop(inst.id, None)
        self._where.pop(inst.id, None)
        self._next_at.pop(inst.id, None)
        self._proofs.pop(inst.id, None)
        self._items.pop(inst.id, None)
        self._generation += 1

    def _drop_moto_state(self) -> None:
        from moto.ec2.models import ec2_backends
        from moto.iam.models import iam_backends

        # EC2 and IAM (instance profiles): the services a launch config names. The account
        # is handed to the next sim once this one stops, so nothing of it may be left.
        for backends in (ec2_backends, iam_backends):
            if self.account_id in backends:
                del backends[self.account_id]
        self._life.clear()
        self._where.clear()
        self._due.clear()
        self._next_at.clear()
        self._listings.clear()
        self._touched()
        self._prepared.clear()
        self._client_tokens.clear()
        self._launch_requests.clear()

    # --- control endpoints -----------------------------------------------------------------

    def _control(self, environ: dict[str, Any], path: str) -> _Answer:
        method = environ.get("REQUEST_METHOD", "GET")
        raw = _read_body(environ)
        try:
            body = json.loads(raw) if raw.strip() else {}
            route = (method, path.rstrip("/"))
            if method == "GET" and path.startswith("/_sim/identity/"):
                return _json_answer(self.identity_proof(path.removeprefix("/_sim/identity/")))
            if route == ("GET", "/_sim/requests"):
                return _json_answer(self.faults.counts())
            if route == ("POST", "/_sim/requests/reset"):
                self.faults.reset_counts()
                return _json_answer({"status": "ok"})
            if route == ("POST", "/_sim/behaviour"):
                self.faults.behaviour.update(**body)
                return _json_answer(self.faults.behaviour.as_dict())
            if route == ("GET", "/_sim/behaviour"):
                return _json_answer(self.faults.behaviour.as_dict())
            if route == ("POST", "/_sim/outcomes"):
                self.queue_outcomes(*body["outcomes"])
                return _json_answer({"status": "ok"})
            if route == ("GET", "/_sim/launch-requests"):
                return _json_answer([asdict(r) for r in self.launch_requests()])
            if route == ("POST", "/_sim/images"):
                self.register_image(body["image_id"], body.get("region", DEFAULT_REGION))
                return _json_answer({"status": "ok"})
            if route == ("GET", "/_sim/instances"):
                return _json_answer([_vm_json(vm) for vm in self.instances()])
            if route == ("POST", "/_sim/kill"):
                self.kill(body["id"], body.get("reason", "preempted"), body.get("state"))
                return _json_answer({"status": "ok"})
            if route == ("POST", "/_sim/remove"):
                self.remove(body["id"])
                return _json_answer({"status": "ok"})
            if route == ("POST", "/_sim/reset"):
                self.reset()
                return _json_answer({"status": "ok"})
        except KeyError as exc:
            return _json_answer({"error": f"not found: {exc.args[0]}"}, "404 Not Found")
        except (ValueError, TypeError) as exc:
            return _json_answer({"error": str(exc)}, "400 Bad Request")
        return _json_answer({"error": f"no route {method} {path}"}, "404 Not Found")


_PHASE_STATES = {
    "pending": "pending",
    "running": "running",
    "stopping": "shutting-down",
    "gone": "terminated",
}


def serve(config: SimCloudConfig, state_dir: Path) -> SimEc2:
    """Start the simulated EC2 for `wmsim serve` (plain http); the certificate of its identity
    documents goes into state_dir."""
    sim = SimEc2(Behaviour.from_config(config), port=config.port, trust_dir=state_dir).start()
    _ = sim.identity_trust_path  # written now, so a config can name it before any worker boots
    return sim


def sign_identity_document(document: Mapping[str, Any], key: rsa.RSAPrivateKey) -> dict[str, str]:
    """IMDS's text of the document and its base64 RSA-SHA256 signature (wrapped in lines, as
    IMDS wraps it)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    text = json.dumps(document, indent=2, separators=(",", " : "))
    signature = key.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())
    return {"document": text, "signature": base64.encodebytes(signature).decode().strip()}


@lru_cache(maxsize=1)
def _identity_certificate() -> x509.Certificate:
    return self_signed(signing_key(IDENTITY_KEY_NAME), "ec2-identity.wm-sim.invalid")


# --- RunInstances: the launch configs it comes from, what reached it, what EC2 refuses ----

Refusal = tuple[str, str]  # EC2's error code and message
RefusalCheck = Callable[[Any, Mapping[str, Any]], Refusal | None]
IMAGE_ID_PATTERN = re.compile(r"ami-(?:[0-9a-f]{8}|[0-9a-f]{17})")
# RunInstances tags only what it creates (EC2's RunInstances reference, TagSpecification.N).
RUN_INSTANCES_TAGGABLE = frozenset(
    {"instance", "volume", "network-interface", "spot-instances-request"}
)
TAG_KEY_MAX_CHARS, TAG_VALUE_MAX_CHARS = 128, 256
METADATA_HOP_LIMIT_MAX = 64
SPOT_ONE_TIME_TERMINATE = {
    "SpotInstanceType": "one-time",
    "InstanceInterruptionBehavior": "terminate",
}
_ABSENT = object()  # a parameter the form does not hold


def example_launch_config(
    region: str,
    *,
    instance_type: str = "m5.large",
    image_id: str | None = None,
    spot: bool = False,
    capacity: int = 1,
    launch_config_id: str | None = None,
    weight: float | None = None,
    max_capacity: int | None = None,
    worker_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Taskcluster AWS launch config (config-aws.yml) that the sim launches as it is: an
    image the sim knows, spot as a one-time request terminated on interruption. `weight` is
    workerManager.initialWeight (0..1 in Taskcluster)."""
    launch_config: dict[str, Any] = {
        "ImageId": image_id or DEFAULT_IMAGE,
        "InstanceType": instance_type,
    }
    if spot:
        launch_config["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": dict(SPOT_ONE_TIME_TERMINATE),
        }
    config: dict[str, Any] = {
        "region": region,
        "launchConfig": launch_config,
        "workerManager": worker_manager(
            capacity=capacity,
            launch_config_id=launch_config_id,
            weight=weight,
            max_capacity=max_capacity,
        ),
    }
    if worker_config is not None:
        config["workerConfig"] = dict(worker_config)
    return config


def decode_query(action: str, params: Mapping[str, str]) -> dict[str, Any]:
    """The parameters of an EC2 Query API request as boto3 takes them: the form's flattened
    keys (`SecurityGroupId.1`, `TagSpecification.1.Tag.2.Key`) folded back into lists and
    structures by EC2's service model, scalars typed. Keys the model does not know are left
    out, and so are empty lists and structures (botocore does not send them)."""
    shape = _ec2_model().operation_model(action).input_shape
    prefixes = set()
    for key in params:
        parts = key.split(".")
        prefixes.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    decoded = _decode(shape, params, "", prefixes)
    return decoded if isinstance(decoded, dict) else {}


def run_instances_refusal(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """EC2's refusal of a RunInstances (decoded, as boto3 takes it) where moto would launch
    it: moto itself refuses an unknown SubnetId or SecurityGroupIds entry, an Availability
    Zone of another region, a block device without Ebs and NetworkInterfaces beside SubnetId.
    `backend` is moto's EC2 backend of the request's account and region."""
    for check in _RUN_INSTANCES_CHECKS:
        refusal = check(backend, request)
        if refusal is not None:
            return refusal
    return None


def _refuse_counts(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    for name in ("MinCount", "MaxCount"):
        if name not in request:
            return "MissingParameter", f"The request must contain the parameter {name}"
        if not isinstance(request[name], int) or request[name] < 1:
            return "InvalidParameterValue", (
                f"Value ({request[name]}) for parameter {name} is invalid. "
                "Expected a positive integer."
            )
    if request["MinCount"] > request["MaxCount"]:
        return "InvalidParameterValue", (
            f"Value ({request['MinCount']}) for parameter MinCount is invalid. "
            "It must be less than or equal to MaxCount."
        )
    return None


def _refuse_values(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """A value outside its parameter's enumeration in EC2's service model (MarketType,
    SpotInstanceType, HttpTokens, VolumeType, InstanceType, ResourceType...)."""
    shape = _ec2_model().operation_model("RunInstances").input_shape
    off = _off_enum(shape, request, "")
    if off is None:
        return None
    path, value = off
    return "InvalidParameterValue", f"Value ({value}) for parameter {path} is invalid."


def _refuse_image(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    image_id = request.get("ImageId")
    if image_id is None:
        if "LaunchTemplate" in request:
            return None
        return "MissingParameter", "The request must contain the parameter ImageId"
    if image_id in backend.amis:
        return None
    if not IMAGE_ID_PATTERN.fullmatch(image_id):
        return "InvalidAMIID.Malformed", f'Invalid id: "{image_id}" (expecting "ami-...")'
    return "InvalidAMIID.NotFound", f"The image id '[{image_id}]' does not exist"


def _refuse_key_pair(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    name = request.get("KeyName")
    if name is None or name in backend.key_pairs:
        return None
    return "InvalidKeyPair.NotFound", f"The key pair '{name}' does not exist"


def _refuse_security_groups(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """Security groups must exist (moto checks only SecurityGroupIds) and sit in the VPC of
    the subnet the instance (or each of its network interfaces) is launched into."""
    interfaces = request.get("NetworkInterfaces") or []
    names = request.get("SecurityGroups") or []
    if not (interfaces or names or request.get("SecurityGroupIds")):
        return None
    default_vpc = backend.get_default_vpc()
    if interfaces and (names or request.get("SecurityGroupIds")):
        return "InvalidParameterCombination", (
            "Network interfaces and an instance-level security groups may not be specified on "
            "the same request"
        )
    if names and request.get("SubnetId"):
        return "InvalidParameterCombination", (
            "The parameter groupName cannot be used with the parameter subnet"
        )
    for name in names:
        vpc_id = default_vpc.id if default_vpc else None
        if backend.get_security_group_from_name(name, vpc_id=vpc_id) is None:
            return "InvalidGroup.NotFound", (
                f"The security group '{name}' does not exist in default VPC '{vpc_id}'"
            )
    placements = [(request.get("SubnetId"), request.get("SecurityGroupIds") or [])]
    if interfaces:
        placements = [(nic.get("SubnetId"), nic.get("Groups") or []) for nic in interfaces]
    for subnet_id, group_ids in placements:
        refusal = group_ids and _refuse_groups_in_subnet(backend, subnet_id, group_ids, default_vpc)
        if refusal:
            return refusal
    return None


def _refuse_groups_in_subnet(
    backend: Any, subnet_id: str | None, group_ids: list[str], default_vpc: Any
) -> Refusal | None:
    from moto.ec2.exceptions import InvalidSubnetIdError

    vpc_id = default_vpc.id if default_vpc else None
    if subnet_id:
        try:
            vpc_id = backend.get_subnet(subnet_id).vpc_id
        except InvalidSubnetIdError:
            return None  # moto answers this one itself
    for group_id in group_ids:
        group = backend.get_security_group_from_id(group_id)
        if group is None:
            return "InvalidGroup.NotFound", f"The security group '{group_id}' does not exist"
        if vpc_id is not None and group.vpc_id != vpc_id:
            where = f"subnet {subnet_id}" if subnet_id else f"default VPC {vpc_id}"
            return "InvalidParameter", (
                f"Security group {group_id} and {where} belong to different networks."
            )
    return None


def _refuse_instance_profile(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """An instance profile that does not exist (moto answers IAM's NoSuchEntity, 404)."""
    from moto.iam.models import iam_backends
    from moto.utilities.utils import get_partition

    profile = request.get("IamInstanceProfile")
    if not profile:
        return None
    iam = iam_backends[backend.account_id][get_partition(backend.region_name)]
    known = list(iam.get_instance_profiles())
    for field, wanted in (("Arn", profile.get("Arn")), ("Name", profile.get("Name"))):
        if wanted is not None and not any(
            (p.arn if field == "Arn" else p.name) == wanted for p in known
        ):
            return "InvalidParameterValue", (
                f"Value ({wanted}) for parameter iamInstanceProfile.{field.lower()} is "
                f"invalid. Invalid IAM Instance Profile {field.lower()}"
            )
    return None


def _refuse_market_options(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    """A malformed spot block (enumerated values are checked with the others)."""
    options = request.get("InstanceMarketOptions")
    if options is None:
        return None
    market = options.get("MarketType")
    spot = options.get("SpotOptions") or {}
    if market is None:
        return "MissingParameter", (
            "The request must contain the parameter InstanceMarketOptions.MarketType"
        )
    if market != "spot":
        if spot:
            return (
                "InvalidParameterCombination",
                "SpotOptions can only be given for MarketType spot",
            )
        target = (request.get("CapacityReservationSpecification") or {}).get(
            "CapacityReservationTarget"
        )
        if not target:
            return "InvalidParameterCombination", (
                "A capacity-block launch must target a Capacity Block reservation "
                "(CapacityReservationSpecification.CapacityReservationTarget)"
            )
        return None
    kind = spot.get("SpotInstanceType", "one-time")
    behaviour = spot.get("InstanceInterruptionBehavior", "terminate")
    if kind == "persistent" and behaviour == "terminate":
        return "InvalidParameterCombination", (
            "For RunInstances, persistent Spot Instance requests are only supported when the "
            "instance interruption behavior is either hibernate or stop."
        )
    if kind == "one-time" and behaviour != "terminate":
        return "InvalidParameterCombination", (
            f"The instance interruption behavior {behaviour} is only supported for persistent "
            "Spot Instance requests."
        )
    if kind == "one-time" and "ValidUntil" in spot:
        return "InvalidParameterCombination", (
            "ValidUntil is only supported for persistent Spot Instance requests."
        )
    if "MaxPrice" in spot and not _positive_decimal(spot["MaxPrice"]):
        return "InvalidParameterValue", (
            f"Value ({spot['MaxPrice']}) for parameter SpotOptions.MaxPrice is invalid."
        )
    return None


def _refuse_metadata_options(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    hops = (request.get("MetadataOptions") or {}).get("HttpPutResponseHopLimit")
    if hops is None or (isinstance(hops, int) and 1 <= hops <= METADATA_HOP_LIMIT_MAX):
        return None
    return "InvalidParameterValue", (
        f"Value ({hops}) for parameter HttpPutResponseHopLimit is invalid. "
        f"It must be between 1 and {METADATA_HOP_LIMIT_MAX}."
    )


def _refuse_tags(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    seen: set[str] = set()
    for spec in request.get("TagSpecifications") or []:
        kind = spec.get("ResourceType")
        if kind not in RUN_INSTANCES_TAGGABLE:
            return "InvalidParameterValue", (
                f"'{kind}' is not a valid taggable resource type for this operation."
            )
        if kind in seen:
            return "InvalidParameterValue", (
                "The same resource type may not be specified more than once in tag specifications"
            )
        seen.add(kind)
        keys: set[str] = set()
        for tag in spec.get("Tags") or []:
            key, value = tag.get("Key", ""), tag.get("Value", "")
            if key in keys:
                return "InvalidParameterValue", f"Duplicate tag key '{key}' specified."
            keys.add(key)
            if key.lower().startswith("aws:"):
                return "InvalidParameterValue", (
                    "Tag keys starting with 'aws:' are reserved for internal use"
                )
            if not 1 <= len(key) <= TAG_KEY_MAX_CHARS or len(value) > TAG_VALUE_MAX_CHARS:
                return "InvalidParameterValue", (
                    f"Tag key '{key[:TAG_KEY_MAX_CHARS]}' or its value is too long (keys "
                    f"1..{TAG_KEY_MAX_CHARS} characters, values up to {TAG_VALUE_MAX_CHARS})"
                )
    return None


def _refuse_user_data(backend: Any, request: Mapping[str, Any]) -> Refusal | None:
    encoded = request.get("UserData")
    if encoded is None:
        return None
    try:
        raw = base64.b64decode(encoded, validate=True)
    except ValueError:
        return "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data."
    if len(raw) > USER_DATA_MAX_BYTES:
        return "InvalidParameterValue", f"User data is limited to {USER_DATA_MAX_BYTES} bytes"
    return None


_RUN_INSTANCES_CHECKS: tuple[RefusalCheck, ...] = (
    _refuse_counts,
    _refuse_tags,  # before the enumerations: EC2's own message for a type it cannot tag
    _refuse_values,
    _refuse_image,
    _refuse_key_pair,
    _refuse_security_groups,
    _refuse_instance_profile,
    _refuse_market_options,
    _refuse_metadata_options,
    _refuse_user_data,
)


@lru_cache(maxsize=1)
def _ec2_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("ec2")


def _decode(shape: Any, params: Mapping[str, str], key: str, prefixes: set[str]) -> Any:
    if key and key not in prefixes:
        return _ABSENT
    if shape.type_name == "structure":
        found = {}
        for name, member in shape.members.items():
            value = _decode(member, params, _join(key, _query_name(member, name)), prefixes)
            if value is not _ABSENT:
                found[name] = value
        return found if found or not key else _ABSENT
    if shape.type_name == "list":
        start = len(key) + 1
        indexes = sorted(
            int(p[start:]) for p in prefixes if p.startswith(key + ".") and p[start:].isdigit()
        )
        items = [_decode(shape.member, params, f"{key}.{i}", prefixes) for i in indexes]
        return [item for item in items if item is not _ABSENT] or _ABSENT
    if key not in params:
        return _ABSENT
    return _scalar(shape.type_name, params[key])


def _query_name(shape: Any, default: str) -> str:
    """The form key of a member, as botocore's EC2 serializer names it."""
    if "queryName" in shape.serialization:
        return str(shape.serialization["queryName"])
    name = shape.serialization.get("name")
    return name[0].upper() + name[1:] if name else default


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _scalar(type_name: str, text: str) -> Any:
    try:
        if type_name == "boolean":
            return text.lower() == "true"
        if type_name in ("integer", "long"):
            return int(text)
        if type_name in ("float", "double"):
            return float(text)
    except ValueError:
        return text  # as sent: the checks refuse it
    return text


def _off_enum(shape: Any, value: Any, path: str) -> tuple[str, Any] | None:
    """The first value (its parameter path and itself) outside its enumeration."""
    if shape.type_name == "structure" and isinstance(value, Mapping):
        for name, item in value.items():
            member = shape.members.get(name)
            if member is not None and (off := _off_enum(member, item, _join(path, name))):
                return off
    elif shape.type_name == "list" and isinstance(value, list):
        for index, item in enumerate(value, 1):
            if off := _off_enum(shape.member, item, f"{path}.{index}"):
                return off
    elif getattr(shape, "enum", None) and value not in shape.enum:
        return path, value
    return None


def _positive_decimal(text: Any) -> bool:
    try:
        return decimal.Decimal(str(text)) > 0
    except decimal.InvalidOperation:
        return False


def _readable(request: dict[str, Any]) -> dict[str, Any]:
    """The request with its UserData as the text it encodes (what the caller gave boto3)."""
    if "UserData" not in request:
        return request
    try:
        text = base64.b64decode(request["UserData"], validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return request
    return {**request, "UserData": text}


def encode_query(shape: Any, value: Any, key: str) -> dict[str, str]:
    """The Query API form of a value, as botocore's EC2 serializer writes it."""
    if shape.type_name == "structure":
        form: dict[str, str] = {}
        for name, item in value.items():
            member = shape.members[name]
            form.update(encode_query(member, item, _join(key, _query_name(member, name))))
        return form
    if shape.type_name == "list":
        form = {}
        for index, item in enumerate(value, 1):
            form.update(encode_query(shape.member, item, f"{key}.{index}"))
        return form
    if isinstance(value, bool):
        return {key: "true" if value else "false"}
    return {key: str(value)}


def _moto_form(params: dict[str, str]) -> dict[str, str]:
    """The RunInstances form moto is given, where moto reads a request otherwise than EC2
    (what was asked stays in the launch record):

    - EC2 takes an instance-store mapping (VirtualName, no Ebs) and an Ebs mapping without
      size or snapshot (the image's root device, sized by the image); moto refuses both with
      MissingParameter. They reach moto as EBS volumes of the image's size, instance stores
      not at all;
    - moto makes any instance with InstanceMarketOptions a spot instance: a capacity-block
      launch reaches it without them.
    """
    form = dict(params)
    if params.get("InstanceMarketOptions.MarketType", "spot") != "spot":
        form = {k: v for k, v in form.items() if not k.startswith("InstanceMarketOptions.")}
    if not any(key.startswith("BlockDeviceMapping.") for key in form):
        return form
    kept = []
    for mapping in decode_query("RunInstances", form).get("BlockDeviceMappings", []):
        ebs = mapping.get("Ebs")
        if ebs is not None and "VolumeSize" not in ebs and "SnapshotId" not in ebs:
            mapping = {**mapping, "Ebs": {**ebs, "VolumeSize": IMAGE_ROOT_VOLUME_GIB}}
        if ebs is not None or "NoDevice" in mapping:
            kept.append(mapping)
    shape = _ec2_model().operation_model("RunInstances").input_shape.members["BlockDeviceMappings"]
    rest = {k: v for k, v in form.items() if not k.startswith("BlockDeviceMapping.")}
    return {**rest, **encode_query(shape, kept, "BlockDeviceMapping")}


def _error_code(answer: _Answer) -> str | None:
    if answer.status.startswith("200"):
        return None
    found = re.search(rb"<Code>([^<]+)</Code>", answer.body)
    return found.group(1).decode() if found else answer.status


def _instance_ids(answer: _Answer) -> tuple[str, ...]:
    if not answer.status.startswith("200"):
        return ()
    found = re.findall(rb"<instanceId>(i-[0-9a-f]+)</instanceId>", answer.body)
    return tuple(dict.fromkeys(i.decode() for i in found))


@contextlib.contextmanager
def _given_id(module_name: str, generator: str, resource_id: str) -> Iterator[None]:
    """While one resource is made (under the sim's lock): moto's id generator for its kind
    answers the id given instead of a random one."""
    import importlib

    module = importlib.import_module(module_name)
    original = getattr(module, generator)
    setattr(module, generator, lambda *args, **kwargs: resource_id)
    try:
        yield
    finally:
        setattr(module, generator, original)


def _add_image(backend: Any, region: str, image_id: str) -> None:
    from moto.ec2.models.amis import Ami

    if image_id not in backend.amis:
        backend.amis[image_id] = Ami(
            backend,
            image_id,
            name=f"wm-sim {image_id}",
            architecture="x86_64",
            virtualization_type="hvm",
            root_device_type="ebs",
            region_name=f"{region}a",
        )


# --- helpers -------------------------------------------------------------------------------


def _claim_account() -> str:
    with _accounts_lock:
        candidate = FIRST_ACCOUNT_ID
        while str(candidate) in _accounts_in_use:
            candidate += 1
        _accounts_in_use.add(str(candidate))
        return str(candidate)


def _release_account(account_id: str) -> None:
    with _accounts_lock:
        _accounts_in_use.discard(account_id)


def _skip_public_amis() -> None:
    """moto makes each region's backend with its 1,301 public AMIs, a volume and a snapshot
    each (~0.2 s a region, paid by the first request there and again after every reset), and
    every instance it creates scans them all to describe its image. wm never lists AMIs:
    `_prepare_region` adds the sim's own few. The effect of moto's
    MOTO_EC2_LOAD_DEFAULT_AMIS=false, without setting the process's environment."""
    from moto.ec2.models.amis import AmiBackend

    AmiBackend._load_amis = lambda self: None


def _speed_up_moto_tag_lookup() -> None:
    """moto finds one resource's tags by scanning every tag in the region with regexes, which
    makes describing N instances cost N^2; a dict lookup gives the same answer."""
    global _tag_lookup_patched
    if _tag_lookup_patched:
        return
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    def get_tags(self: Any) -> list[dict[str, str]]:
        resource_id = getattr(self, "id", None)
        tags = self.ec2_backend.tags.get(resource_id) if resource_id else None
        if not tags:
            return []
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
        return [
            {"resource_id": resource_id, "key": k, "value": v, "resource_type": kind}
            for k, v in tags.items()
        ]

    TaggedEC2Resource.get_tags = get_tags
    _tag_lookup_patched = True


@contextlib.contextmanager
def _new_instances_found_fast(backend: Any) -> Iterator[None]:
    """While seeding: moto's RunInstances looks up each new instance (to attach its root
    volume) and that volume (to tag it) by scanning the whole region, which makes seeding N
    instances cost N^2. The instance being made is the last one of the newest reservation and
    volumes are keyed by id, so both are found directly; anything else goes to moto's own
    lookups. The shortcuts live on this backend object for the duration of the call only."""
    get_instance, describe_volumes = backend.get_instance, backend.describe_volumes

    def newest_instance(instance_id: str) -> Any:
        if backend.reservations:
            newest = next(reversed(backend.reservations.values()))
            if newest.instances and newest.instances[-1].id == instance_id:
                return newest.instances[-1]
        return get_instance(instance_id)

    def volumes_by_id(volume_ids: list[str] | None = None, filters: Any = None) -> list[Any]:
        if volume_ids and not filters and all(v in backend.volumes for v in volume_ids):
            return [backend.volumes[v] for v in volume_ids]
        return describe_volumes(volume_ids, filters)

    backend.get_instance, backend.describe_volumes = newest_instance, volumes_by_id
    try:
        yield
    finally:
        del backend.get_instance, backend.describe_volumes


def _set_state(inst: Any, name: str) -> None:
    inst._state.name = name
    inst._state.code = MOTO_STATES[name][0]


def _set_reason(inst: Any, code: str, message: str) -> None:
    from moto.ec2.models.instances import StateReason

    inst.state_reason = StateReason(f"{code}: {message}", code)
    inst._reason = f"{code}: {message}"


def _kill_reason(reason: str, spot: bool) -> tuple[str, str]:
    if "." in reason and " " not in reason:
        return reason, reason.split(".", 1)[1]  # already an EC2 code, e.g. Server.ScheduledStop
    if reason == "preempted" and spot:
        return SPOT_TERMINATION
    return INTERNAL_ERROR[0], f"{INTERNAL_ERROR[1]} ({reason})"


def _user_data(inst: Any) -> bytes | None:
    """The instance's user data as launched (moto keeps botocore's base64)."""
    encoded = getattr(inst, "user_data", None)
    if not encoded:
        return None
    raw = encoded.as_bytes() if hasattr(encoded, "as_bytes") else str(encoded).encode()
    return base64.b64decode(raw)


def _tags(inst: Any) -> dict[str, str]:
    return dict(inst.ec2_backend.tags.get(inst.id, {}))


def _sim_vm(region: str, inst: Any) -> SimVm:
    tags = _tags(inst)
    return SimVm(
        cloud_id=inst.id,
        name=tags.get("Name", inst.id),
        region=region,
        state=MOTO_STATES[inst.state][1],
        tags=tags,
        spot=inst.lifecycle == "spot",
        launch_index=int(inst.ami_launch_index),
    )


def _vm_json(vm: SimVm) -> dict[str, Any]:
    data = asdict(vm)
    data["tags"] = dict(vm.tags)
    return data


def _filters(params: dict[str, str]) -> dict[str, list[str]]:
    names: dict[str, str] = {}
    values: dict[str, list[tuple[int, str]]] = {}
    for key, value in params.items():
        match = re.fullmatch(r"Filter\.(\d+)\.(Name|Value\.(\d+))", key)
        if not match:
            continue
        if match.group(2) == "Name":
            names[match.group(1)] = value
        else:
            values.setdefault(match.group(1), []).append((int(match.group(3)), value))
    return {
        name: [v for _, v in sorted(values.get(slot, []))]
        for slot, name in sorted(names.items(), key=lambda item: int(item[0]))
    }


def _launch_params(params: Mapping[str, str]) -> dict[str, str]:
    # What defines a launch: every parameter but the protocol's own.
    return {k: v for k, v in params.items() if k not in ("Action", "Version")}


def _make_token(seq: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": seq}).encode()).decode()


def _token_seq(token: str | None) -> int | None:
    """The creation sequence a page token resumes after; 0 without a token, None if invalid."""
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["after"])
    except (ValueError, KeyError, TypeError):
        return None


def _region_of(environ: dict[str, Any]) -> str:
    # SigV4: "AWS4-HMAC-SHA256 Credential=AKID/20261202/us-east-1/ec2/aws4_request, ..."
    match = re.search(r"Credential=[^/]+/\d+/([a-z0-9-]+)/", environ.get("HTTP_AUTHORIZATION", ""))
    return match.group(1) if match else DEFAULT_REGION


def _moto_environ(region: str, account_id: str) -> dict[str, Any]:
    """A request's WSGI environ as moto routes it (EC2 of that region and account), for what
    the sim asks of moto on its own (`_call_moto` fills in the body)."""
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "HTTP_HOST": f"ec2.{region}.amazonaws.com",
        "HTTP_AUTHORIZATION": (
            f"AWS4-HMAC-SHA256 Credential=sim/20260101/{region}/ec2/aws4_request, "
            "SignedHeaders=host, Signature=sim"
        ),
        "HTTP_X_MOTO_ACCOUNT_ID": account_id,
    }


def _int_param(params: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(params.get(name, default))
    except ValueError:
        return default  # moto answers the malformed request itself


def _read_body(environ: dict[str, Any]) -> bytes:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    # Put it back for moto, which reads the form itself.
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def _ec2_error(
    status: int, code: str, message: str, headers: list[tuple[str, str]] | None = None
) -> _Answer:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{escape(message)}</Message>"
        "</Error>"
        f"</Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()
    reason = {400: "Bad Request", 500: "Internal Server Error", 503: "Service Unavailable"}
    all_headers = [("Content-Type", "text/xml;charset=UTF-8"), *(headers or [])]
    return _Answer(f"{status} {reason.get(status, 'Error')}", all_headers, body)


def _not_found(ids: list[str]) -> _Answer:
    if len(ids) == 1:
        message = f"The instance ID '{ids[0]}' does not exist"
    else:
        message = f"The instance IDs '{', '.join(ids)}' do not exist"
    return _ec2_error(400, "InvalidInstanceID.NotFound", message)


def _json_answer(data: Any, status: str = "200 OK") -> _Answer:
    return _Answer(status, [("Content-Type", "application/json")], json.dumps(data).encode())


def _respond(start_response: Callable[..., Any], answer: _Answer) -> list[bytes]:
    start_response(answer.status, [*answer.headers, ("Content-Length", str(len(answer.body)))])
    return [answer.body]
