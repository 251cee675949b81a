"""AWS EC2 provider: one boto3 EC2 client per region, every call through the gate.

EC2 launches a whole batch with one RunInstances and one set of tags, so instances carry the
batch tag and their AmiLaunchIndex maps each to its intent (a batch of one also gets the
worker tag). The batch's ClientToken makes RunInstances idempotent: a repeat (the gate's retry
after a lost answer, or a create of the same batch again) gets the first call's instances back
and launches nothing, on EC2 as in the simulated EC2. So `create` is that one call, with
nothing looked up before it: wm never creates a batch twice, and an intent whose answer was
lost is found by `lookup`.

What is launched is the Taskcluster launch config's `launchConfig`, verbatim, as the
RunInstances parameters (subnet, security groups, disks, spot options...), with exactly the
overrides worker-manager makes (services/worker-manager/src/providers/aws.js): the UserData,
the counts and the instance and volume tags; wm adds its ClientToken and ownership tags.

This module is the provider's calls and what it composes: run_request.py (RunInstances'
parameters), instances.py (what an instance's description says: its state, tags, the
CloudInstance), errors.py (EC2's errors -> ErrorCategory), clients.py (boto3's sessions and
clients) and listing.py (DescribeInstances pages read for the fields wm uses).
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wm.calls import CallClass, Draw
from wm.config.loader import DEFAULT_ROOT_URL
from wm.errors import CloudError, ErrorCategory, ErrorScope
from wm.kinds import aws as aws_kind
from wm.kinds.aws import AwsProviderConfig
from wm.model import CloudInstance, LaunchSpec, Offering, WorkerRef
from wm.providers.aws import errors as aws_errors
from wm.providers.aws.clients import build_client
from wm.providers.aws.errors import classify
from wm.providers.aws.instances import cloud_instance, identity, tags_of, with_owner
from wm.providers.aws.run_request import run_request
from wm.providers.aws.signals import CALL_CLASSES as SIGNAL_CALL_CLASSES
from wm.providers.base import (
    NO_RECORDS,
    TAG_BATCH,
    TAG_DEPLOYMENT,
    TAG_WORKER,
    Answered,
    LaunchBatch,
    LaunchResult,
    TerminateResult,
    UnitRecords,
    not_listening,
    owned,
)
from wm.providers.gate import provider_gate
from wm.take_over.marks import split_imported

if TYPE_CHECKING:
    from wm.take_over.adoption.aws import AwsAdoption

LIST_PAGE_SIZE = 1000  # DescribeInstances MaxResults: the largest page EC2 allows
LOOKUP_CHUNK_SIZE = 200  # values in one DescribeInstances filter (EC2 accepts up to 200)
TERMINATE_CHUNK_SIZE = 1000  # instance ids in one TerminateInstances
INSTANCE_ID_PATTERN = re.compile(r"\bi-[0-9a-f]{8,17}\b")


# EC2's limits per account and region: which of its buckets each operation draws from.
# RunInstances and TerminateInstances each have a request bucket (one token a call) and a
# resource bucket (one token an instance).
CALL_CLASSES: Mapping[str, tuple[CallClass, ...]] = {
    "RunInstances": (CallClass.RUN_INSTANCES_CALLS, CallClass.RUN_INSTANCES),
    "DescribeInstances": (CallClass.DESCRIBE,),
    "TerminateInstances": (CallClass.TERMINATE_INSTANCES_CALLS, CallClass.TERMINATE_INSTANCES),
    **SIGNAL_CALL_CLASSES,  # the launch choice's signal reads (signals.py)
}
PER_INSTANCE = frozenset({CallClass.RUN_INSTANCES, CallClass.TERMINATE_INSTANCES})


def _spend(region: str, operation: str, instances: int = 0) -> tuple[Draw, ...]:
    """What one call of this operation draws, in its region's buckets."""
    return tuple(
        Draw(region, c, float(instances) if c in PER_INSTANCE else 1.0)
        for c in CALL_CLASSES[operation]
    )


class AwsProvider:
    """wm's Provider for one AWS account (see wm/providers/base.py for the contract)."""

    create_batch_max = aws_kind.DESCRIPTION.create_batch_max

    def __init__(
        self, config: AwsProviderConfig, deployment_id: str, root_url: str = DEFAULT_ROOT_URL
    ) -> None:
        self.id = config.id
        self.regions = tuple(config.regions)
        self.deployment_id = deployment_id
        self.root_url = root_url
        # Every call passes its regional `spend`; the table still refuses an unlisted operation.
        self.gate = provider_gate(config, classify, CALL_CLASSES)
        self._config = config
        # The take-over of a legacy worker-manager's instances (adopt_legacy), set where
        # providers are built (wm/providers/__init__.py); None: wm's own instances only.
        self.adoption: AwsAdoption | None = None
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        # Built now, as the other kinds build theirs: botocore makes a client and each
        # operation's model on first use (~0.3 s in a fresh process, importing boto3 included),
        # which a provisioner's first pass with demand would otherwise wait for.
        for region in self.regions:
            model = self._client(region).meta.service_model
            for operation in CALL_CLASSES:
                model.operation_model(operation)

    # --- the Provider protocol -------------------------------------------------------------

    def create(self, batch: LaunchBatch, answered: Answered = not_listening) -> list[LaunchResult]:
        # One RunInstances answers the whole batch at once: nothing to tell before returning.
        if not batch.intents:
            return []
        region = batch.spec.region
        try:
            request = run_request(batch, self.id, self.deployment_id, self.root_url)
            if len(request["UserData"].encode()) > aws_kind.EC2_USER_DATA_MAX_BYTES:
                raise CloudError(
                    self.id,
                    ErrorCategory.BAD_CONFIG,
                    "UserDataTooLong",
                    f"user data is over EC2's {aws_kind.EC2_USER_DATA_MAX_BYTES} bytes: move some "
                    "of the launch config's worker_config into a secret",
                    operation="RunInstances",
                )
            reply = self.gate.call(
                "RunInstances",
                self._client(region).run_instances,
                # EC2's request bucket, and its resource bucket, which counts instances.
                spend=_spend(region, "RunInstances", instances=len(batch.intents)),
                **request,
            )
        except CloudError as error:
            return [LaunchResult(i.worker_id, None, error=error) for i in batch.intents]
        return self._launch_results(batch, with_owner(reply, reply.get("Instances", [])))

    def list_pages(
        self, region: str, records: UnitRecords = NO_RECORDS
    ) -> Iterator[list[CloudInstance]]:
        # Where to look is in the config (the region): the records add nothing.
        for raws in self.describe_pages(region, [self._owned()]):
            yield [self.cloud_instance(region, raw) for raw in raws]
        if self.adoption is not None:  # the take-over's: a legacy worker-manager's instances
            yield from self.adoption.pages(region)

    def list_instances(self, region: str, records: UnitRecords = NO_RECORDS) -> list[CloudInstance]:
        return [i for page in self.list_pages(region, records) for i in page]

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        return {
            worker_id: self._instance_of(region, raw)
            for worker_id, (region, raw) in self._locate(refs).items()
        }

    def _instance_of(self, region: str, raw: dict[str, Any]) -> CloudInstance:
        """The instance as the scan sees it: a legacy worker-manager's under its import key."""
        if self.adoption is not None and (theirs := self.adoption.instance(region, raw)):
            return theirs
        return self.cloud_instance(region, raw)

    def recorded(self, instances: Sequence[CloudInstance]) -> None:
        """EC2 lists everything a worker holds: its listings record nothing."""

    def terminate(self, refs: Sequence[WorkerRef]) -> list[TerminateResult]:
        located = self._locate(refs)
        results: dict[str, TerminateResult] = {}
        pending: dict[str, list[tuple[str, str]]] = defaultdict(list)  # region -> (worker, id)
        for ref in refs:
            hit = located.get(ref.worker_id)
            state = hit[1]["State"]["Name"] if hit else "terminated"
            if state == "terminated":  # or not found: nothing of it is left
                results[ref.worker_id] = TerminateResult(ref.worker_id, True, nothing_sent=True)
            elif state == "shutting-down":  # already on its way; asking again changes nothing
                results[ref.worker_id] = TerminateResult(ref.worker_id, False, nothing_sent=True)
            else:
                pending[hit[0]].append((ref.worker_id, hit[1]["InstanceId"]))
        for region, items in pending.items():
            for chunk in _chunks(items, TERMINATE_CHUNK_SIZE):
                outcome = self._terminate_ids(region, [instance_id for _, instance_id in chunk])
                for worker_id, instance_id in chunk:
                    state_or_error = outcome[instance_id]
                    if isinstance(state_or_error, CloudError):
                        results[worker_id] = TerminateResult(worker_id, False, state_or_error)
                    else:
                        results[worker_id] = TerminateResult(
                            worker_id, state_or_error == "terminated"
                        )
        return [results[ref.worker_id] for ref in refs]

    def offering(self, launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
        return aws_kind.DESCRIPTION.offering(launch_config, worker_group)

    def error_scope(self, error: CloudError, spec: LaunchSpec) -> ErrorScope | None:
        return aws_errors.error_scope(error.code, error.message, spec)

    def failed_launch(self, reason: str | None) -> CloudError | None:
        """EC2 refuses a launch in RunInstances' answer, never after taking it."""
        return None

    def close(self) -> None:
        self.gate.close()
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

    # --- answers ---------------------------------------------------------------------------

    def _launch_results(
        self, batch: LaunchBatch, instances: list[dict[str, Any]]
    ) -> list[LaunchResult]:
        by_index = {int(raw.get("AmiLaunchIndex", 0)): raw for raw in instances}
        results = []
        for index, intent in enumerate(batch.intents):
            raw = by_index.get(index)
            if raw is None:
                # EC2 launched fewer than MaxCount and says not why: an instance limit or
                # short capacity. Filed as a quota refusal, as before capacity was a category.
                error = CloudError(
                    self.id,
                    ErrorCategory.QUOTA,
                    "PartialLaunch",
                    f"EC2 launched {len(by_index)} of the {len(batch.intents)} instances asked for",
                    operation="RunInstances",
                )
                results.append(LaunchResult(intent.worker_id, None, error, launch_index=index))
                continue
            results.append(
                LaunchResult(
                    intent.worker_id,
                    raw["InstanceId"],
                    None,
                    index,
                    provider_data=identity(raw),
                    tc_worker_id=raw["InstanceId"],
                )
            )
        return results

    def _locate(self, refs: Sequence[WorkerRef]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Find this deployment's instances for the refs: by instance id where the row has one,
        else by batch tag and launch index (or the worker tag). worker id -> (region, raw)."""
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        by_region: dict[str, list[WorkerRef]] = defaultdict(list)
        for ref in refs:
            by_region[ref.region].append(ref)
        for region, all_refs in by_region.items():
            # Rows `wm import` wrote are the take-over's to find (none without it).
            imported, group = split_imported(all_refs)
            if imported and self.adoption is not None:
                for worker_id, raw in self.adoption.locate(region, imported).items():
                    found[worker_id] = (region, raw)
            with_id = [ref for ref in group if ref.cloud_id]
            for chunk in _chunks(with_id, LOOKUP_CHUNK_SIZE):
                ids = [ref.cloud_id for ref in chunk]
                # A filter, not InstanceIds: one missing id would fail the whole call.
                raws = self._describe(
                    region, [self._owned(), {"Name": "instance-id", "Values": ids}]
                )
                by_id = {raw["InstanceId"]: raw for raw in raws}
                for ref in chunk:
                    if ref.cloud_id in by_id:
                        found[ref.worker_id] = (region, by_id[ref.cloud_id])
            without_id = [ref for ref in group if not ref.cloud_id]
            for ref, raw in self._locate_by_tags(region, without_id):
                found[ref.worker_id] = (region, raw)
        return found

    def _locate_by_tags(
        self, region: str, refs: list[WorkerRef]
    ) -> Iterator[tuple[WorkerRef, dict[str, Any]]]:
        batches = sorted({ref.batch_token for ref in refs if ref.batch_token})
        workers = sorted({ref.worker_id for ref in refs if not ref.batch_token})
        raws: list[dict[str, Any]] = []
        for key, values in ((TAG_BATCH, batches), (TAG_WORKER, workers)):
            for chunk in _chunks(values, LOOKUP_CHUNK_SIZE):
                raws += self._describe(region, [self._owned(), _tag_filter(key, chunk)])
        by_slot = {}
        by_worker = {}
        for raw in raws:
            tags = tags_of(raw)
            by_slot[(tags.get(TAG_BATCH), int(raw.get("AmiLaunchIndex", 0)))] = raw
            if TAG_WORKER in tags:
                by_worker[tags[TAG_WORKER]] = raw
        for ref in refs:
            raw = by_worker.get(ref.worker_id)
            if ref.batch_token and ref.launch_index is not None:
                raw = by_slot.get((ref.batch_token, ref.launch_index), raw)
            if raw is not None:
                yield ref, raw

    def _describe(
        self,
        region: str,
        filters: list[dict[str, Any]],
        accept: Callable[[Mapping[str, str]], object] | None = None,
    ) -> list[dict[str, Any]]:
        """Every instance of this provider matching the filters, all pages at once."""
        return [raw for raws in self.describe_pages(region, filters, accept) for raw in raws]

    def describe_pages(
        self,
        region: str,
        filters: list[dict[str, Any]],
        accept: Callable[[Mapping[str, str]], object] | None = None,
    ) -> Iterator[list[dict[str, Any]]]:
        """The instances of this provider matching the filters (which name the deployment),
        a page at a time at the largest page size: the next page is asked for only once the
        caller is done with this one. The provider tag is checked here, not filtered on: an
        instance made before wm wrote one has none, and is still this provider's. `accept`
        replaces that check (a legacy worker-manager's instances carry no wm tag)."""
        if accept is None:

            def accept(tags: Mapping[str, str]) -> bool:
                return owned(tags, self.deployment_id, self.id)

        client = self._client(region)
        request: dict[str, Any] = {"Filters": filters, "MaxResults": LIST_PAGE_SIZE}
        while True:
            page = self.gate.call(
                "DescribeInstances",
                client.describe_instances,
                spend=_spend(region, "DescribeInstances"),
                **request,
            )
            token = page.get("NextToken")
            raws = [
                raw
                for reservation in page.pop("Reservations", [])
                for raw in with_owner(reservation, reservation.get("Instances", []))
                if accept(tags_of(raw))
            ]
            del page  # the next page is parsed after this one is let go of
            yield raws
            del raws
            if not token:
                return
            request = {**request, "NextToken": token}

    def _terminate_ids(self, region: str, ids: list[str]) -> dict[str, str | CloudError]:
        """instance id -> its state after the call, or the error that is its own."""
        client = self._client(region)
        try:
            reply = self.gate.call(
                "TerminateInstances",
                client.terminate_instances,
                spend=_spend(region, "TerminateInstances", instances=len(ids)),
                InstanceIds=ids,
            )
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                # EC2 refuses the whole call when one id is gone; those are done, retry the rest.
                missing = set(INSTANCE_ID_PATTERN.findall(error.message)) & set(ids)
                if not missing:
                    missing = set(ids) if len(ids) == 1 else set()
                if not missing:
                    raise
                rest = [i for i in ids if i not in missing]
                outcome: dict[str, str | CloudError] = dict.fromkeys(missing, "terminated")
                if rest:
                    outcome.update(self._terminate_ids(region, rest))
                return outcome
            if error.retryable or error.category is ErrorCategory.PAUSED:
                raise
            if len(ids) == 1:
                return {ids[0]: error}
            # One instance may refuse (e.g. termination protection): let the others go.
            outcome = {}
            for instance_id in ids:
                outcome.update(self._terminate_ids(region, [instance_id]))
            return outcome
        states: dict[str, str | CloudError] = {
            item["InstanceId"]: item["CurrentState"]["Name"]
            for item in reply.get("TerminatingInstances", [])
        }
        for instance_id in ids:
            states.setdefault(instance_id, "shutting-down")
        return states

    # --- mapping ---------------------------------------------------------------------------

    def cloud_instance(self, region: str, raw: dict[str, Any]) -> CloudInstance:
        return cloud_instance(self.id, region, raw)

    def _owned(self) -> dict[str, Any]:
        return _tag_filter(TAG_DEPLOYMENT, [self.deployment_id])

    # --- clients ---------------------------------------------------------------------------

    def _client(self, region: str) -> Any:
        with self._lock:
            client = self._clients.get(region)
            if client is None:
                client = self._clients[region] = build_client(self._config, region)
            return client


def make(
    config: AwsProviderConfig, deployment_id: str, root_url: str = DEFAULT_ROOT_URL
) -> AwsProvider:
    return AwsProvider(config, deployment_id, root_url)


def _tag_filter(key: str, values: Sequence[str]) -> dict[str, Any]:
    return {"Name": f"tag:{key}", "Values": list(values)}


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
