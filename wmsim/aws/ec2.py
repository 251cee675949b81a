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

Market: with a market scenario (wmsim/market_sim.py, `use_market` or POST /_sim/market),
RunInstances beyond the offering's spare capacity or spot quota is refused as EC2 refuses it
(wmsim/aws/market.py), running spot instances are reclaimed by the market's hazard (terminated
with Server.SpotInstanceTermination after the two-minute notice), and every instance is billed
(GET /_sim/ledger).

Signals: DescribeSpotPriceHistory (moto's answer is a constant) and GetSpotPlacementScores are
the sim's own (wmsim/aws/signals.py), from `signals` (wmsim/signals.py: a market's values when
one is attached with `signals.use_market`, else a static table); POST /_sim/signal-fates
{"operation", "fates": ["forbidden"|"garbage"]} forces their next answers' faults.

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

The parts, each in its module of wmsim/aws: the Query API form (`query`), EC2's answers and
error shape (`wire`), RunInstances' refusals, idempotency and quota (`run_instances`),
DescribeInstances' pages (`describe`, `pages`), the lifecycle over moto's models (`lifecycle`,
`moto_models`), seeding (`seeding`), identity documents (`identity`), IMDS (`imds`); SimEc2 here
holds their state and serves them.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from wmsim import metadata
from wmsim.aws import imds as imds_ec2
from wmsim.aws.describe import DescribeInstances, Listing
from wmsim.aws.identity import (
    IDENTITY_KEY_NAME,
    IDENTITY_STATES,
    IDENTITY_TRUST_FILE,
    identity_certificate,
    identity_document,
    sign_identity_document,
)
from wmsim.aws.lifecycle import (
    TERMINATED_VISIBLE_S,
    Ec2Lifecycle,
    InstanceLife,
    kill_reason,
    sim_vm,
    vm_json,
)
from wmsim.aws.moto_models import (
    DEFAULT_IMAGE,
    DEFAULT_REGION,
    claim_account,
    launched_user_data,
    moto_environ,
    release_account,
    set_reason,
    set_state,
    skip_public_amis,
    speed_up_moto_tag_lookup,
)
from wmsim.aws.query import EC2_API_VERSION, launch_params
from wmsim.aws.run_instances import LAUNCH_REQUESTS_KEPT, LaunchRequest, RunInstances
from wmsim.aws.seeding import Ec2Seeding
from wmsim.aws.signals import DEFAULT_SIGNAL_TYPES, KIND, SIGNAL_ACTIONS, SPOT_SHARE, Ec2Signals
from wmsim.aws.wire import Answer, ec2_error, int_param, json_answer, read_body, region_of, respond
from wmsim.behaviour import Behaviour, Faults, Outcome, Preemptions, SimVm
from wmsim.cloud import SimCloudConfig
from wmsim.market_sim import MarketBound
from wmsim.signals import SignalFates, SignalValues
from wmsim.trust import TrustDir, pem, signing_key
from wmsim.wsgi import ServerThread

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

MUTATING_ACTIONS = frozenset(
    {"RunInstances", "TerminateInstances", "StopInstances", "StartInstances", "RebootInstances"}
)
# Instances whose OS has booted and not yet stopped, so whose metadata service answers.
# A stopped or terminated instance is not billed (the market's ledger, wmsim/market_sim.py).
BILLING_ENDS = frozenset({"TerminateInstances", "StopInstances"})
METADATA_STATES = frozenset({"running", "stopping", "shutting-down"})

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class SimEc2(RunInstances, DescribeInstances, Ec2Seeding, Ec2Lifecycle, Ec2Signals, MarketBound):
    """moto's EC2 on 127.0.0.1 with latency, faults, quotas, lifecycle and instance paging."""

    market_kind = "aws"
    market_notice_s = 120.0  # the spot interruption notice

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
        # What DescribeSpotPriceHistory and GetSpotPlacementScores serve (wmsim/signals.py).
        self.signals = SignalValues(KIND, SPOT_SHARE, DEFAULT_SIGNAL_TYPES)
        self.signal_fates = SignalFates()
        self._initial_behaviour = self.faults.behaviour.as_dict()  # what reset() goes back to
        self.terminated_visible_s = terminated_visible_s
        self.account_id = claim_account()
        self._port = port
        self._lock = threading.RLock()
        self._life: dict[str, InstanceLife] = {}
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
        self._listings: dict[tuple[str, str], Listing] = {}
        self._prepared: set[int] = set()  # ids of region backends already made lean
        self._fail_count = 0
        # ClientToken -> (digest of the RunInstances parameters, the answer it got)
        self._client_tokens: dict[str, tuple[str, Answer]] = {}
        self._launch_requests: deque[LaunchRequest] = deque(maxlen=LAUNCH_REQUESTS_KEPT)
        self._moto: WsgiApp | None = None
        self._server: ServerThread | None = None
        self._trust = TrustDir(trust_dir, "wm-sim-ec2-")
        self._identity_path: Path | None = None
        self._imds_tokens = imds_ec2.Ec2Tokens()

    # --- lifecycle of the sim itself -------------------------------------------------------

    def start(self) -> SimEc2:
        from moto.server import DomainDispatcherApplication, create_backend_app

        speed_up_moto_tag_lookup()
        skip_public_amis()
        self._moto = DomainDispatcherApplication(create_backend_app)
        self._warm()
        self._server = ServerThread(self._app, port=self._port).start()
        return self

    def _warm(self) -> None:
        """Answer a listing and a launch once, then forget them. moto builds its EC2 models and
        response templates on a process's first request (~0.45 s): paid here, a client's first
        call costs what later ones do, and a benchmark's first run does not measure the sim
        waking up as the latency of the process under test."""
        environ = moto_environ(DEFAULT_REGION, self.account_id)
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
        release_account(self.account_id)

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
        self.use_market(self.market_initial)
        self.signal_fates.clear()
        self.faults.reset_counts()
        self.faults.behaviour.update(**self._initial_behaviour)

    # --- inspection and out-of-band events -------------------------------------------------

    def instances(self) -> list[SimVm]:
        self._preempt_due()
        with self._lock:
            self._sync(time.monotonic())
            return [sim_vm(region, inst) for region, inst in self._all_instances()]

    def kill(
        self, cloud_id_or_name: str, reason: str = "preempted", state: str | None = None
    ) -> None:
        """The instance dies out of band: a spot instance is terminated with EC2's spot reason,
        another is stopped (or `state`) with Server.InternalError."""
        with self._lock:
            _region, inst = self._find(cloud_id_or_name)
            spot = inst.lifecycle == "spot"
            code, message = kill_reason(reason, spot)
            final = state or ("terminated" if spot else "stopped")
            if final == "terminated":
                inst.terminate()
            elif final == "stopped":
                inst.stop()
            else:
                raise ValueError(f"kill state must be terminated or stopped, not {final!r}")
            set_state(inst, final)
            set_reason(inst, code, message)
            self._market_stopped(inst.id)
            self._touched(only=[inst.id])
            now = time.monotonic()
            life = self._life[inst.id]
            life.pinned = final
            if final == "terminated":
                life.deleted_at = life.deleted_at or now
                life.gone_at = life.gone_at or now

    def _preempt_due(self) -> None:
        """Pre-empt the spot instances whose time has come (Behaviour.preempt_share, and the
        market's reclaims)."""
        self._market_reclaims()
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
            self._market_stopped(inst.id)

    def queue_outcomes(self, *outcomes: Outcome | str) -> None:
        """Force the outcome of the next EC2 requests, one each, whatever the behaviour says:
        a counted burst (e.g. two throttles, then normal service) without relying on chance."""
        self.faults.force(*outcomes)

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
                path.write_bytes(pem(identity_certificate()))
                self._identity_path = path
            return self._identity_path

    def identity_document(self, instance_id: str) -> dict[str, Any]:
        """The instance's identity document fields, as IMDS reports them."""
        with self._lock:
            region, inst = self._find(instance_id)
            if inst.state not in IDENTITY_STATES:
                raise KeyError(f"instance {instance_id!r} is gone: it has no metadata service")
            return identity_document(self.account_id, region, inst)

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
            user_data = launched_user_data(inst)
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
            return respond(start_response, self._control(environ, path))
        if path.startswith("/moto-api/reset"):
            self.reset()
            return respond(start_response, json_answer({"status": "ok"}))
        if path.startswith("/moto-api"):
            with self._lock:
                self._touched()
            return self._forward(environ, start_response)
        body = read_body(environ)
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
                params=launch_params(params),
                vms=int_param(params, "MaxCount", 1),
            )
        else:
            outcome = self.faults.before(action)
        if outcome not in (Outcome.OK, Outcome.LOST):
            return respond(start_response, self._fault_answer(outcome))
        # moto picks the account from this header; it keeps sims in one process apart.
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = self.account_id
        region = region_of(environ)
        with self._lock:
            self._prepare_region(region)
            self._sync(time.monotonic())
            if action == "DescribeInstances":
                answer = self._describe_instances(environ, params, region)
            elif action in SIGNAL_ACTIONS:
                answer = self._signal_answer(action, params, region)
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
            if action in BILLING_ENDS and answer.status.startswith("200"):
                for key, value in params.items():
                    if key.startswith("InstanceId."):
                        self._market_stopped(value)
        if outcome is Outcome.LOST:  # carried out; the client never hears of it
            self.faults.hold_lost_answer()
            answer = self._fault_answer(Outcome.FAIL)
        return respond(start_response, answer)

    def _fault_answer(self, outcome: Outcome) -> Answer:
        behaviour = self.faults.behaviour
        if outcome is Outcome.THROTTLE:
            headers = []
            if behaviour.retry_after_s is not None:
                headers.append(("Retry-After", f"{behaviour.retry_after_s:g}"))
            return ec2_error(503, "RequestLimitExceeded", "Request limit exceeded.", headers)
        # EC2 answers server faults both ways; alternate so clients meet both.
        self._fail_count += 1
        if self._fail_count % 2:
            return ec2_error(500, "InternalError", "An internal error has occurred.")
        return ec2_error(503, "Unavailable", "The service is unavailable. Try again shortly.")

    def _forward(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        assert self._moto is not None
        return self._moto(environ, start_response)

    def _call_moto(self, environ: dict[str, Any], params: dict[str, str]) -> Answer:
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
        return Answer(captured["status"], headers, body)

    # --- control endpoints -----------------------------------------------------------------

    def _control(self, environ: dict[str, Any], path: str) -> Answer:
        method = environ.get("REQUEST_METHOD", "GET")
        raw = read_body(environ)
        try:
            body = json.loads(raw) if raw.strip() else {}
            found = self._market_control(method, path, body)
            if found is not None:
                status, answer = found
                return json_answer(answer, "200 OK" if status == 200 else "400 Bad Request")
            route = (method, path.rstrip("/"))
            if method == "GET" and path.startswith("/_sim/identity/"):
                return json_answer(self.identity_proof(path.removeprefix("/_sim/identity/")))
            if route == ("GET", "/_sim/requests"):
                return json_answer(self.faults.counts())
            if route == ("POST", "/_sim/requests/reset"):
                self.faults.reset_counts()
                return json_answer({"status": "ok"})
            if route == ("POST", "/_sim/behaviour"):
                self.faults.behaviour.update(**body)
                return json_answer(self.faults.behaviour.as_dict())
            if route == ("GET", "/_sim/behaviour"):
                return json_answer(self.faults.behaviour.as_dict())
            if route == ("POST", "/_sim/outcomes"):
                self.queue_outcomes(*body["outcomes"])
                return json_answer({"status": "ok"})
            if route == ("POST", "/_sim/signal-fates"):
                self.signal_fates.force(body["operation"], *body["fates"])
                return json_answer({"status": "ok"})
            if route == ("GET", "/_sim/launch-requests"):
                return json_answer([asdict(r) for r in self.launch_requests()])
            if route == ("POST", "/_sim/images"):
                self.register_image(body["image_id"], body.get("region", DEFAULT_REGION))
                return json_answer({"status": "ok"})
            if route == ("GET", "/_sim/instances"):
                return json_answer([vm_json(vm) for vm in self.instances()])
            if route == ("POST", "/_sim/kill"):
                self.kill(body["id"], body.get("reason", "preempted"), body.get("state"))
                return json_answer({"status": "ok"})
            if route == ("POST", "/_sim/remove"):
                self.remove(body["id"])
                return json_answer({"status": "ok"})
            if route == ("POST", "/_sim/reset"):
                self.reset()
                return json_answer({"status": "ok"})
        except KeyError as exc:
            return json_answer({"error": f"not found: {exc.args[0]}"}, "404 Not Found")
        except (ValueError, TypeError) as exc:
            return json_answer({"error": str(exc)}, "400 Bad Request")
        return json_answer({"error": f"no route {method} {path}"}, "404 Not Found")


def serve(config: SimCloudConfig, state_dir: Path) -> SimEc2:
    """Start the simulated EC2 for `wmsim serve` (plain http); the certificate of its identity
    documents goes into state_dir."""
    sim = SimEc2(Behaviour.from_config(config), port=config.port, trust_dir=state_dir).start()
    _ = sim.identity_trust_path  # written now, so a config can name it before any worker boots
    return sim
