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
- isolation: each SimEc2 in a process has its own moto account, so two sims never share state;
- speed: moto's per-resource tag lookup scans every tag in the region (N^2 for a describe); the
  sim swaps in a dict lookup with the same answers, and drops moto's 1,301 public AMIs, which
  every new instance would otherwise scan. `seed_instances` makes large fleets in-process.

Control endpoints for other processes live under /_sim/ (see `_control`); they are neither
counted nor faulted. Besides the common ones, POST /_sim/outcomes {"outcomes": ["throttle"]}
forces the outcome of the next requests (`queue_outcomes`). POST /moto-api/reset resets this
sim only.

Metadata: every instance's IMDSv2 is served at /_vm/<instance id>/latest/... (see
wmsim/metadata.py for the addressing and wmsim/imds_ec2.py for the paths): its user data as
launched, its signed identity document, meta-data, and a spot interruption notice two minutes
before a pre-emption. That is what the simulated worker-runner reads.

Identity (older tests): GET /_sim/identity/<instance id> answers {"document", "signature"} for a
live instance, as its instance metadata service would (instance-identity/document and /signature),
signed with the sim's own RSA key; `identity_trust_path` is the certificate to trust for it
(the provider config's `identity_certificate`), and `mint_identity` makes forgeries for tests.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from wmsim import imds_ec2, metadata
from wmsim.behaviour import (
    Behaviour,
    Faults,
    Outcome,
    Preemptions,
    SimVm,
    digest,
    lifecycle_state,
)
from wmsim.config import SimCloudConfig
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
EMPTY_PAGE_ID = "i-00000000000000000"  # an instance-id filter value that matches nothing
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
IDENTITY_KEY_NAME = "ec2-identity"
IDENTITY_TRUST_FILE = "ec2-identity-certificate.pem"
IDENTITY_DOCUMENT_VERSION = "2017-09-30"
IDENTITY_STATES = frozenset({"pending", "running", "stopping", "stopped", "shutting-down"})
# Instances whose OS has booted and not yet stopped, so whose metadata service answers.
METADATA_STATES = frozenset({"running", "stopping", "shutting-down"})
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
class _Answer:
    status: str
    headers: list[tuple[str, str]]
    body: bytes


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
        self._prepared: set[int] = set()  # ids of region backends already made lean
        self._fail_count = 0
        # ClientToken -> (digest of the RunInstances parameters, the answer it got)
        self._client_tokens: dict[str, tuple[str, _Answer]] = {}
        self._moto: WsgiApp | None = None
        self._server: ServerThread | None = None
        self._trust = TrustDir(trust_dir, "wm-sim-ec2-")
        self._identity_path: Path | None = None
        self._imds_tokens = imds_ec2.Ec2Tokens()

    # --- lifecycle of the sim itself -------------------------------------------------------

    def start(self) -> SimEc2:
        from moto.server import DomainDispatcherApplication, create_backend_app

        _speed_up_moto_tag_lookup()
        self._moto = DomainDispatcherApplication(create_backend_app)
        self._server = ServerThread(self._app, port=self._port).start()
        return self

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
            self._sync(time.monotonic())
            return [inst.id for inst in reservation.instances]

    def queue_outcomes(self, *outcomes: Outcome | str) -> None:
        """Force the outcome of the next EC2 requests, one each, whatever the behaviour says:
        a counted burst (e.g. two throttles, then normal service) without relying on chance."""
        self.faults.force(*outcomes)

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
            proof = self.identity_proof(inst.id)
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
            return self._forward(environ, start_response)
        body = _read_body(environ)
        params = dict(parse_qsl(body.decode() or environ.get("QUERY_STRING", "")))
        action = params.get("Action")
        if not action:
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
            environ, {**params, "MinCount": str(launch), "MaxCount": str(launch)}
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
            reservations = self._backend(region).describe_instances(filters=filters)
        except NotImplementedError:
            names = ", ".join(sorted(filters))
            return _ec2_error(400, "InvalidParameterValue", f"The filter '{names}' is invalid")
        matched = [inst for reservation in reservations for inst in reservation.instances]
        if ids:
            known = {inst.id for r, inst in self._all_instances() if r == region}
            missing = [i for i in ids if i not in known]
            if missing:
                return _not_found(missing)
            wanted = set(ids)
            matched = [inst for inst in matched if inst.id in wanted]
        matched.sort(key=lambda inst: self._life[inst.id].seq)
        after = _token_seq(params.get("NextToken"))
        if after is None:
            return _ec2_error(400, "InvalidPaginationToken", "The pagination token is invalid.")
        matched = [inst for inst in matched if self._life[inst.id].seq > after]
        page = matched if limit is None else matched[:limit]
        more = len(page) < len(matched)
        rest = {
            k: v
            for k, v in params.items()
            if not k.startswith("InstanceId.") and k not in ("MaxResults", "NextToken")
        }
        slot = 1 + max((int(k.split(".")[1]) for k in params if k.startswith("Filter.")), default=0)
        rest[f"Filter.{slot}.Name"] = "instance-id"
        for index, inst_id in enumerate([inst.id for inst in page] or [EMPTY_PAGE_ID], 1):
            rest[f"Filter.{slot}.Value.{index}"] = inst_id
        rest["MaxResults"] = str(UNBOUNDED_MAX_RESULTS)
        answer = self._call_moto(environ, rest)
        if more and answer.status.startswith("200"):
            token = _make_token(self._life[page[-1].id].seq)
            closing = b"</DescribeInstancesResponse>"
            body = answer.body.replace(
                closing, f"<nextToken>{token}</nextToken>".encode() + closing
            )
            answer = _Answer(answer.status, answer.headers, body)
        return answer

    # --- moto's models ---------------------------------------------------------------------

    def _backend(self, region: str) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.account_id][region]

    def _prepare_region(self, region: str) -> None:
        backend = self._backend(region)
        if id(backend) not in self._prepared:
            # Every instance moto creates scans all public AMIs (1,301 of them) to describe its
            # image; wm never lists AMIs, so the sim keeps none.
            backend.amis.clear()
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
        self._sync(time.monotonic())
        for region, inst in self._all_instances():
            if inst.id == cloud_id_or_name or _tags(inst).get("Name") == cloud_id_or_name:
                return region, inst
        raise KeyError(f"no instance {cloud_id_or_name!r}")

    def _sync(self, now: float) -> None:
        """Bring moto's instance states in line with the simulated lifecycle."""
        behaviour = self.faults.behaviour
        seen = set()
        for region, inst in list(self._all_instances()):
            seen.add(inst.id)
            life = self._life.get(inst.id)
            if life is None:
                self._seq += 1
                life = self._life[inst.id] = _Life(self._seq, now)
                if inst.lifecycle == "spot":
                    self.preemptions.schedule(inst.id, now + behaviour.boot_s)
            if life.pinned is not None and inst.state != life.pinned:
                life.pinned = None  # changed through the API since (e.g. StartInstances)
            if life.pinned is None:
                if inst.state == "terminated" and life.deleted_at is None:
                    life.deleted_at = now  # moto terminates at once; the sim makes it take time
                if life.deleted_at is not None or inst.state in ("pending", "running"):
                    phase = lifecycle_state(
                        now, life.created_at, behaviour.boot_s, life.deleted_at, behaviour.delete_s
                    )
                    _set_state(inst, _PHASE_STATES[phase])
            if inst.state == "terminated":
                life.gone_at = life.gone_at or now
                if now >= life.gone_at + self.terminated_visible_s:
                    self._drop_instance(self._backend(region), inst)
        for gone in set(self._life) - seen:
            del self._life[gone]

    def _drop_instance(self, backend: Any, inst: Any) -> None:
        for reservation_id, reservation in list(backend.reservations.items()):
            if inst in reservation.instances:
                reservation.instances.remove(inst)
                if not reservation.instances:
                    del backend.reservations[reservation_id]
        backend.tags.pop(inst.id, None)
        self._life.pop(inst.id, None)

    def _drop_moto_state(self) -> None:
        from moto.ec2.models import ec2_backends

        if self.account_id in ec2_backends:
            del ec2_backends[self.account_id]
        self._life.clear()
        self._prepared.clear()
        self._client_tokens.clear()

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
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
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
