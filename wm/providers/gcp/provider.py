"""Google Compute Engine: one instance per worker, named by its worker id; zones are scan units.

A launch config is Taskcluster's (config-google.yml): the instances.insert body itself, plus
`region`, `zone`, `workerConfig`, `workerManager` (and the deprecated `capacityPerInstance`).
The body sent is that launch config without those keys, everything else verbatim, with
worker-manager's overrides (services/worker-manager/src/providers/google.js) and wm's
ownership labels (insert_body.py); it goes through the SDK's typed Instance, so a key the API
does not have fails the launch, naming the key, before any call.

Creates are one `instances.insert` per intent with `requestId` derived from the intent's token,
run concurrently (bounded by the gate), not one `bulkInsert` per batch: bulkInsert's
per-instance properties carry only a name and hostname, so every instance of a batch would get
the same labels (no worker label), its failures are reported per batch rather than per worker,
and its single requestId does not match wm's one token per intent. Inserts return as soon as
GCE accepted them: an Operation that is already DONE with an error (quota, capacity) becomes a
LaunchResult error; one still running is accepted, and the next list or look-up shows what
became of it. ExtendedOperation.result() is never used (it polls the public endpoint).

Pre-emption costs no extra call: GCE shows a pre-empted Spot VM as TERMINATED with no reason
field (the reason lives only in a `compute.instances.preempted` zone operation), and wm never
stops its own instances (it deletes them), so a TERMINATED Spot instance is reported with
reason "preempted" and any other stopped instance with its status as the reason.

This module is the provider's calls and what it composes: insert_body.py (an insert's body and
requestId), states.py (statuses -> worker states, stop reasons) and errors.py (the SDK's
exceptions and finished Operations' errors -> ErrorCategory).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from wm.calls import CallClass
from wm.config.loader import DEFAULT_ROOT_URL
from wm.config.provider_ids import gce_label
from wm.errors import CloudError, ErrorCategory, ErrorScope
from wm.kinds import gcp as gcp_kind
from wm.kinds.gcp import GcpProviderConfig
from wm.model import CloudInstance, LaunchSpec, Offering, WorkerRef, WorkerState
from wm.providers.base import (
    NO_RECORDS,
    TAG_BATCH,
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_WORKER,
    Answered,
    LaunchBatch,
    LaunchIntent,
    LaunchResult,
    TerminateResult,
    UnitRecords,
    not_listening,
    owned,
    ownership_tags,
    telling,
)
from wm.providers.gate import provider_gate
from wm.providers.gcp import errors as gcp_errors
from wm.providers.gcp.errors import (
    OPERATION_FAILED,
    REASON_MAX_CHARS,
    classify,
    done,
    operation_error,
)
from wm.providers.gcp.insert_body import insert_body, request_id
from wm.providers.gcp.signals import CALL_CLASSES as SIGNAL_CALL_CLASSES
from wm.providers.gcp.states import (
    REASON_PREEMPTED,
    SHUTTING_DOWN_STATUSES,
    stop_reason,
    worker_state,
)
from wm.providers.meter import carry
from wm.take_over.marks import imported_from

if TYPE_CHECKING:
    from wm.take_over.adoption.gcp import GcpAdoption

T = TypeVar("T")
R = TypeVar("R")

LIST_PAGE_SIZE = 500  # the largest maxResults instances.list accepts
LABEL_VALUE_MAX_CHARS = 63
# Where a label had to be sanitised, the original value is kept in metadata under the label key.
ORIGINAL_VALUE_KEYS = (TAG_POOL, TAG_LAUNCH_CONFIG, TAG_BATCH)
WORKER_NAME_PATTERN = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")  # RFC 1035, as GCE names
# The code of a launch failure wm finds before calling GCE: the launch config holds a key (or
# a value) the API does not have, so no insert could take it.
INVALID_LAUNCH_CONFIG = "invalidLaunchConfig"


# GCE's per-project rate quotas: which each operation counts against.
CALL_CLASSES: Mapping[str, tuple[CallClass, ...]] = {
    "instances.insert": (CallClass.WRITE,),
    "instances.delete": (CallClass.WRITE,),
    "instances.get": (CallClass.READ,),
    "instances.list": (CallClass.LIST,),
    "zoneOperations.get": (CallClass.READ,),
    **SIGNAL_CALL_CLASSES,  # the launch choice's signal reads (signals.py)
}


def make(
    config: GcpProviderConfig, deployment_id: str, root_url: str = DEFAULT_ROOT_URL
) -> GcpProvider:
    """Build the provider with its SDK client and gate (wm/providers/__init__.py calls this)."""
    return GcpProvider(
        config,
        deployment_id,
        _client(config, "InstancesClient"),
        root_url,
        operations=_client(config, "ZoneOperationsClient"),
    )


def _client(config: GcpProviderConfig, name: str) -> Any:
    # The SDK loads lazily, so a scanner for another cloud never imports it.
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    options = ClientOptions(api_endpoint=config.endpoint) if config.endpoint else None
    # Simulated: fixed anonymous credentials, so google.auth.default never probes metadata.
    credentials = AnonymousCredentials() if config.credentials == "simulated" else None
    return getattr(compute_v1, name)(
        credentials=credentials, client_options=options, transport="rest"
    )


class GcpProvider:
    """One GCP project; `regions` are its zones."""

    create_batch_max = gcp_kind.DESCRIPTION.create_batch_max

    def __init__(
        self,
        config: GcpProviderConfig,
        deployment_id: str,
        instances: Any,
        root_url: str = DEFAULT_ROOT_URL,
        *,
        operations: Any = None,
    ) -> None:
        from google.cloud import compute_v1

        self.id = config.id
        self.root_url = root_url
        self._service_account = config.worker_service_account_email
        self.regions = tuple(config.regions)
        self._compute = compute_v1
        self._project = config.project
        self._deployment = _label_value(deployment_id)
        # The provider id as labels hold it: escaped, injective (wm/config/provider_ids.py).
        self._provider_label = gce_label(config.id)
        self._instances = instances
        # Zone operations: where GCE says how an insert it accepted ended (None: never asked).
        self._operations = operations
        self.gate = provider_gate(config, classify, CALL_CLASSES)
        self._timeout_s = config.gate.timeout_s
        # Fans calls out; the gate still bounds how many reach the cloud at once.
        self._pool = ThreadPoolExecutor(config.gate.concurrency, thread_name_prefix=config.id)
        self._filter = f'labels.{TAG_DEPLOYMENT} = "{self._deployment}"'
        # The take-over of a legacy worker-manager's instances (adopt_legacy), set where
        # providers are built (wm/providers/__init__.py); None: wm's own instances only.
        self.adoption: GcpAdoption | None = None

    # -- create ----------------------------------------------------------------------------------

    def create(self, batch: LaunchBatch, answered: Answered = not_listening) -> list[LaunchResult]:
        for intent in batch.intents:
            if not WORKER_NAME_PATTERN.fullmatch(intent.worker_id):
                raise ValueError(f"worker id {intent.worker_id!r} is not a valid GCE name")
        jobs = [
            telling(answered, partial(self._insert, batch, i, intent))
            for i, intent in enumerate(batch.intents)
        ]
        return self._each(jobs)

    def _insert(self, batch: LaunchBatch, index: int, intent: LaunchIntent) -> LaunchResult:
        zone = batch.spec.region
        try:
            resource = self._instance_resource(batch, intent)
        except CloudError as error:  # the launch config is no instances.insert body
            return self._failed(intent, index, error)
        request = self._compute.InsertInstanceRequest(
            project=self._project,
            zone=zone,
            instance_resource=resource,
            request_id=request_id(intent.idempotency_token),
        )
        try:
            op = self._call("instances.insert", self._instances.insert_unary, request=request)
        except CloudError as error:
            if error.code == "alreadyExists":
                return self._adopt(zone, index, intent)
            return self._failed(intent, index, error.not_found_as_config())
        failure = operation_error(self.id, op, "instances.insert")
        if failure is not None:
            return self._failed(intent, index, failure.not_found_as_config())
        if not op.target_id:  # GCE always names the new instance's id; be safe if it did not
            return self._adopt(zone, index, intent)
        return LaunchResult(
            intent.worker_id,
            str(op.target_id),
            launch_index=index,
            provider_data={"operation": op.name, **_identity(op.target_id, zone)},
            tc_worker_id=str(op.target_id),
        )

    def _adopt(self, zone: str, index: int, intent: LaunchIntent) -> LaunchResult:
        """The name exists (a retry after GCE forgot the requestId): use it if it is ours."""
        try:
            instance = self.get(zone, intent.worker_id)
        except CloudError as error:
            error.maybe_applied = True  # GCE said the instance exists: it may be this one
            return self._failed(intent, index, error)
        if instance is None or not self._owns(instance, intent.worker_id):
            error = CloudError(
                self.id,
                ErrorCategory.BAD_CONFIG,
                "alreadyExists",
                f"instance {intent.worker_id} in {zone} exists and is not this deployment's",
                operation="instances.insert",
            )
            return self._failed(intent, index, error)
        return LaunchResult(
            intent.worker_id,
            str(instance.id),
            launch_index=index,
            provider_data=_identity(instance.id, zone),
            tc_worker_id=str(instance.id),
        )

    @staticmethod
    def _failed(intent: LaunchIntent, index: int, error: CloudError) -> LaunchResult:
        return LaunchResult(intent.worker_id, None, error=error, launch_index=index)

    def _instance_resource(self, batch: LaunchBatch, intent: LaunchIntent) -> Any:
        """The typed Instance of the insert body, or a CloudError naming the key the SDK (and
        so the API) does not have: nothing is sent for a launch config GCE cannot take."""
        from google.protobuf import json_format

        body = self._insert_body(batch, intent)
        try:
            return self._compute.Instance.from_json(json.dumps(body))
        except (json_format.ParseError, TypeError, ValueError) as error:
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise CloudError(
                self.id,
                ErrorCategory.BAD_CONFIG,
                INVALID_LAUNCH_CONFIG,
                f"launch config {batch.spec.launch_config_id} is not an instances.insert body: "
                f"{first_line}",
                operation="instances.insert",
            ) from None

    def _insert_body(self, batch: LaunchBatch, intent: LaunchIntent) -> dict[str, Any]:
        spec = batch.spec
        tc_labels = gcp_kind.gce_labels(
            pool_id=batch.pool_id,
            provider_id=self.id,
            launch_config_id=spec.launch_config_id,
            owner=spec.pool_owner,
        )
        wm_labels = ownership_tags(
            self._deployment,
            self._provider_label,
            _label_value(batch.pool_id),
            _label_value(spec.launch_config_id),
            worker=intent.worker_id,
            batch=_label_value(batch.batch_token),
        )
        originals = {
            TAG_POOL: batch.pool_id,
            TAG_LAUNCH_CONFIG: spec.launch_config_id,
            TAG_BATCH: batch.batch_token,
        }
        taskcluster = gcp_kind.gce_metadata(
            root_url=self.root_url,
            pool_id=batch.pool_id,
            provider_id=self.id,
            zone=spec.region,
            worker_config=spec.worker_config,
        )
        items = [{"key": gcp_kind.GCE_METADATA_KEY, "value": json.dumps(taskcluster)}]
        # Where a label had to be sanitised, its original value rides in metadata.
        items += [
            {"key": key, "value": value}
            for key, value in originals.items()
            if wm_labels[key] != value
        ]
        # Without a service account the VM's metadata server mints no identity token.
        accounts = (
            gcp_kind.gce_service_accounts(self._service_account) if self._service_account else []
        )
        return insert_body(
            spec.launch_config,
            name=intent.worker_id,
            labels=tc_labels,
            own_labels=wm_labels,
            description=spec.pool_description,
            service_accounts=accounts,
            metadata_items=items,
        )

    # -- list, look up ---------------------------------------------------------------------------

    def list_pages(
        self, region: str, records: UnitRecords = NO_RECORDS
    ) -> Iterator[list[CloudInstance]]:
        # Where to look is in the config (the region): the records add nothing.
        for items in self.pages(region, self._filter):
            yield [self.cloud_instance(i, region) for i in items if self._owns(i)]
        if self.adoption is not None:  # the take-over's: a legacy worker-manager's instances
            yield from self.adoption.pages(region)

    def list_instances(self, region: str, records: UnitRecords = NO_RECORDS) -> list[CloudInstance]:
        return [i for page in self.list_pages(region, records) for i in page]

    def pages(self, region: str, filter_: str) -> Iterator[list[Any]]:
        """The listing a page at a time: the next page is asked for once the caller is done
        with this one."""
        token = ""
        while True:
            request = self._compute.ListInstancesRequest(
                project=self._project,
                zone=region,
                filter=filter_,
                max_results=LIST_PAGE_SIZE,
                page_token=token,
            )
            try:
                # Page by page, each through the gate; the pager's own iteration would fetch
                # later pages outside it.
                page = self._call("instances.list", self._instances.list, request=request)
            except CloudError as error:
                raise error.not_found_as_config() from error
            items = list(page.items)
            token = page.next_page_token
            del page
            yield items
            del items
            if not token:
                return

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        jobs = [partial(self._lookup_one, ref) for ref in refs]
        found = self._each(jobs)
        return {ref.worker_id: item for ref, item in zip(refs, found, strict=True) if item}

    def _lookup_one(self, ref: WorkerRef) -> CloudInstance | None:
        if imported_from(ref.provider_data) is not None:  # the take-over's (none without it)
            return None if self.adoption is None else self.adoption.lookup_one(ref)
        instance = self.get(ref.region, ref.worker_id)
        if instance is None:
            return self._insert_outcome(ref)
        if not self._owns(instance, ref.worker_id):
            return None
        return self.cloud_instance(instance, ref.region)

    def _insert_outcome(self, ref: WorkerRef) -> CloudInstance | None:
        """A worker GCE does not show, as its insert operation tells it: still being made
        (the operation runs), or refused after GCE accepted the insert. GCE fails a zone out
        of the machine type (ZONE_RESOURCE_POOL_EXHAUSTED) in the operation, often minutes
        later, and the instance is then gone: worker-manager's scanner reads the operation
        for the same reason. None: gone, nothing to tell."""
        name = ref.provider_data.get("operation")
        if not name or self._operations is None:
            return None
        try:
            request = self._compute.GetZoneOperationRequest(
                project=self._project, zone=ref.region, operation=str(name)
            )
            op = self._call("zoneOperations.get", self._operations.get, request=request)
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:  # GCE keeps operations for a while
                return None
            raise
        state = None if done(op) else WorkerState.REQUESTED
        failure = operation_error(self.id, op, "instances.insert")
        if failure is not None:
            state = WorkerState.STOPPED
        if state is None:
            return None
        # The operation's errors, each "<code>: <message>", the first its code.
        reason = f"{OPERATION_FAILED}{failure.message}" if failure else None
        return CloudInstance(
            worker_id=ref.worker_id,
            cloud_id=ref.cloud_id or str(op.target_id),
            region=ref.region,
            state=state,
            reason=reason[:REASON_MAX_CHARS] if reason else None,
            provider_data=dict(ref.provider_data),
            tc_worker_id=ref.cloud_id or None,
        )

    def get(self, zone: str, name: str) -> Any | None:
        try:
            return self._call(
                "instances.get",
                self._instances.get,
                project=self._project,
                zone=zone,
                instance=name,
            )
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return None
            raise

    # -- terminate -------------------------------------------------------------------------------

    def recorded(self, instances: Sequence[CloudInstance]) -> None:
        """GCE lists everything a worker holds: its listings record nothing."""

    def terminate(self, refs: Sequence[WorkerRef]) -> list[TerminateResult]:
        return self._each([partial(self._terminate_one, ref) for ref in refs])

    def _terminate_one(self, ref: WorkerRef) -> TerminateResult:
        try:
            return self._delete(ref)
        except CloudError as error:
            return TerminateResult(ref.worker_id, gone=False, error=error)

    def _delete(self, ref: WorkerRef) -> TerminateResult:
        # The instance the cloud listed, by its name, where known (an orphan found by its
        # labels may carry any name); else the name wm gave the worker's instance.
        name = str(ref.provider_data.get("name") or ref.worker_id)
        adoption = None
        if imported_from(ref.provider_data) is not None:  # the take-over's: its name for it
            adoption = self.adoption
            if adoption is None:  # without the take-over no legacy instance is this provider's
                return TerminateResult(ref.worker_id, gone=True, nothing_sent=True)
            name = adoption.teardown_name(ref)
        # Ownership before the delete: a same-named instance of another deployment (or an
        # unlabelled one) is not this worker's, so for this worker nothing is left; an
        # imported worker's is worker-manager's of this provider (none without the take-over).
        instance = self.get(ref.region, name)
        if instance is None or not (
            adoption.instance(instance, ref.region) is not None
            if adoption is not None
            else self._owns(instance, ref.worker_id)
        ):
            return TerminateResult(ref.worker_id, gone=True, nothing_sent=True)
        if instance.status in SHUTTING_DOWN_STATUSES:
            return TerminateResult(ref.worker_id, gone=False, nothing_sent=True)
        request = self._compute.DeleteInstanceRequest(
            project=self._project,
            zone=ref.region,
            instance=name,
            request_id=request_id(f"delete:{instance.id}"),
        )
        try:
            op = self._call("instances.delete", self._instances.delete_unary, request=request)
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return TerminateResult(ref.worker_id, gone=True)
            raise
        failure = operation_error(self.id, op, "instances.delete")
        if failure is not None:
            return TerminateResult(ref.worker_id, gone=False, error=failure)
        # GCE finishes a delete operation only once the instance and its auto-delete disks
        # are gone: DONE is the cloud's confirmation.
        return TerminateResult(ref.worker_id, gone=done(op))

    def offering(self, launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
        return gcp_kind.DESCRIPTION.offering(launch_config, worker_group)

    def error_scope(self, error: CloudError, spec: LaunchSpec) -> ErrorScope | None:
        return gcp_errors.error_scope(error.code, error.message, spec)

    def failed_launch(self, reason: str | None) -> CloudError | None:
        return gcp_errors.failed_launch(self.id, reason)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.gate.close()
        self._instances.transport.close()
        if self._operations is not None:
            self._operations.transport.close()

    # -- helpers ---------------------------------------------------------------------------------

    def _call(self, operation: str, fn: Callable[..., T], **kwargs: Any) -> T:
        # retry=None: google-api-core would otherwise retry GETs on 503 itself; the gate is the
        # only retry policy.
        return self.gate.call(operation, fn, retry=None, timeout=self._timeout_s, **kwargs)

    def _each(self, jobs: Iterable[Callable[[], R]]) -> list[R]:
        """Run jobs concurrently; results in order; the first failure raised after all ended."""
        futures = [self._pool.submit(carry(job)) for job in jobs]
        errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error
        return [f.result() for f in futures]

    def _owns(self, instance: Any, worker_id: str | None = None) -> bool:
        labels = instance.labels
        if not owned(labels, self._deployment, self._provider_label):
            return False
        return worker_id is None or labels.get(TAG_WORKER) == worker_id

    def cloud_instance(self, instance: Any, zone: str) -> CloudInstance:
        status = instance.status
        state = worker_state(self.id, status)
        labels = dict(instance.labels)
        metadata = {item.key: item.value for item in instance.metadata.items}
        spot = instance.scheduling.provisioning_model == "SPOT" or instance.scheduling.preemptible
        return CloudInstance(
            worker_id=labels.get(TAG_WORKER) or instance.name,
            cloud_id=str(instance.id),
            region=zone,
            state=state,
            pool_id=metadata.get(TAG_POOL) or labels.get(TAG_POOL),
            launch_config_id=metadata.get(TAG_LAUNCH_CONFIG) or labels.get(TAG_LAUNCH_CONFIG),
            launched_at=_timestamp(instance.creation_timestamp),
            reason=stop_reason(status, spot),
            preempted=stop_reason(status, spot) == REASON_PREEMPTED,
            batch_token=metadata.get(TAG_BATCH) or labels.get(TAG_BATCH),
            provider_data={
                "name": instance.name,
                "status": status,
                "spot": spot,
                **_identity(instance.id, zone),
            },
            tc_worker_id=str(instance.id),
        )


# -- pure helpers (unit-tested) --------------------------------------------------------------------


def _identity(instance_id: int, zone: str) -> dict[str, str]:
    """What identity tokens are checked against (identity.py): the numeric id and zone."""
    return {"instance_id": str(instance_id), "zone": zone}


def _label_value(value: str) -> str:
    """GCE label values: lowercase letters, digits, `_` and `-`, at most 63 characters."""
    return re.sub(r"[^a-z0-9_-]", "_", value.lower())[:LABEL_VALUE_MAX_CHARS]


def _timestamp(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
