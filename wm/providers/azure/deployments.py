"""The calls of Azure's ARM-template form (arm.py and arm_workers.py hold its rules, pure): one
deployment PUT per worker, the scan's lists of deployments, look-ups, and teardowns from the
record, every call through the provider's gate; its deletes are arm_deletes.py's, its leftover
sweep arm_leftovers.py's. The provider (provider.py) owns an ArmDeployments and is its ArmHost
(arm_host.py); no module of the form imports the provider."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from wm.errors import CloudError, ErrorCategory
from wm.kinds import azure as azure_kind
from wm.model import CloudInstance, WorkerRef
from wm.ops.telemetry import log
from wm.providers.azure.arm import (
    ACTIVE_CODES,
    ARM_DEPLOYMENT,
    FAILED_REMEMBERED,
    OS_DISK_KEY,
    TAG_KEEP,
    TAG_WORKER_GROUP,
    TEMPLATE_CODES,
    VM_TYPE,
    DeploymentRef,
    DeploymentView,
    Made,
    Phase,
    Teardown,
    admin_credentials,
    as_mapping,
    deployment_body,
    deployment_name,
    deployment_ref,
    keep_deployment,
    location,
    made_by,
    made_of,
    os_disk_of,
    parse_resource_id,
    resource_group,
    same_region,
    teardown_plan,
    template_error,
    vm_resource_id,
)
from wm.providers.azure.arm_deletes import ArmDeletes, Deleted
from wm.providers.azure.arm_host import ArmHost
from wm.providers.azure.arm_leftovers import LeftoverSweep
from wm.providers.azure.arm_workers import deployment_instance, gone_instance, join, view
from wm.providers.azure.names import computer_name, vm_name
from wm.providers.base import (
    TAG_WORKER,
    Answered,
    LaunchBatch,
    LaunchResult,
    TerminateResult,
    not_listening,
    telling,
)
from wm.providers.meter import carry


class ArmDeployments:
    """The ARM-template side of one Azure provider: creates, lists, look-ups and teardowns of
    deployments, every call through the provider's gate."""

    def __init__(self, provider: ArmHost) -> None:
        self._p = provider
        self._lock = threading.Lock()
        # What follows is caches and pacing, none of it knowledge a scan needs: where to look
        # comes from the scan's records (config and database), never from this process's past.
        self._ready: set[str] = set()  # groups this process made sure exist (lower case)
        # One ensuring of a group at a time (worker-manager's resourceGroupCache promise): launch
        # configs in several locations share a group, and two concurrent PUTs of it in different
        # locations would have ARM refuse the second (InvalidResourceGroupLocation).
        self._group_locks: dict[str, threading.Lock] = {}
        # failed deployment (group, name, end), lower case -> what its operations say it made
        self._failed: dict[tuple[str, str, str], Made] = {}
        self._secret = secrets.token_bytes(32)
        self._deletes = ArmDeletes(provider)
        self.sweep = LeftoverSweep(provider)

    @staticmethod
    def ref_of(ref: WorkerRef) -> DeploymentRef | None:
        """The deployment of a row, from its provider data. An intent whose create answer was
        lost has none: `find_unrecorded` finds its deployment by name, in any process."""
        return deployment_ref(ref.provider_data)

    # -- create ------------------------------------------------------------------------------

    def create(self, batch: LaunchBatch, answered: Answered = not_listening) -> list[LaunchResult]:
        spec = batch.spec
        launch_config = spec.launch_config
        where = location(launch_config) or spec.region
        group = resource_group(launch_config, self._p.resource_group)
        keep = keep_deployment(launch_config)
        try:
            self._ensure_group(group, where)
        except CloudError as error:
            error = error.not_found_as_config()
            return [LaunchResult(i.worker_id, None, error=error) for i in batch.intents]

        def create_one(worker_id: str) -> LaunchResult:
            return self._create_one(batch, worker_id, where, DeploymentRef(group, "", keep))

        jobs = carry(telling(answered, create_one))
        return list(self._p.pool.map(jobs, [i.worker_id for i in batch.intents]))

    def _create_one(
        self, batch: LaunchBatch, worker_id: str, where: str, target: DeploymentRef
    ) -> LaunchResult:
        vm = vm_name(worker_id)
        ref = replace(target, name=deployment_name(vm))
        tags = self._p.worker_tags(batch, worker_id, where)
        username, password = admin_credentials(self._secret, worker_id)
        injected = azure_kind.azure_arm_parameters(
            tags=tags,
            vm_name=vm,
            computer_name=computer_name(worker_id),
            admin_username=username,
            admin_password=password,
            custom_data=azure_kind.azure_custom_data(
                root_url=self._p.root_url,
                pool_id=batch.pool_id,
                provider_id=self._p.id,
                location=where,
            ),
        )
        deployment_tags = {**tags, **({TAG_KEEP: "true"} if ref.keep else {})}
        body = deployment_body(batch.spec.launch_config[ARM_DEPLOYMENT], injected, deployment_tags)
        try:
            self._p.gate.call("Deployments_CreateOrUpdate", self._put, ref, body)
        except CloudError as error:
            return self._refused(batch, worker_id, ref, error)
        return self._accepted(worker_id, ref)

    def _refused(
        self, batch: LaunchBatch, worker_id: str, ref: DeploymentRef, error: CloudError
    ) -> LaunchResult:
        code = error.code.lower()
        if code in ACTIVE_CODES:
            # The deployment exists and runs: a retried PUT. It is the answer, if it is ours.
            return self._adopt(worker_id, ref, error)
        if code == "resourcegroupnotfound":
            with self._lock:  # deleted since this process made sure of it: again next time
                self._ready.discard(ref.resource_group.lower())
        if code in TEMPLATE_CODES:
            error = template_error(error, batch.spec.launch_config_id)
        return LaunchResult(worker_id, None, error=error.not_found_as_config())

    def _adopt(self, worker_id: str, ref: DeploymentRef, conflict: CloudError) -> LaunchResult:
        try:
            found = self._get(ref)
        except CloudError as error:
            error.maybe_applied = True  # ARM said the deployment exists: it may be this one
            return LaunchResult(worker_id, None, error=error)
        tags = found.tags if found is not None else {}
        ours = self._p.owns_tags(tags)
        if found is None or not ours or tags.get(TAG_WORKER) != worker_id:
            return LaunchResult(worker_id, None, error=conflict)
        return self._accepted(worker_id, ref)

    def _accepted(self, worker_id: str, ref: DeploymentRef) -> LaunchResult:
        return LaunchResult(
            worker_id,
            vm_resource_id(self._p.subscription_id, ref.resource_group, ref.vm_name),
            provider_data=ref.data(),
            tc_worker_id=ref.vm_name,
        )

    def _ensure_group(self, group: str, where: str) -> None:
        """Create the launch config's resource group if it is missing, once per process.
        The provider's own group is the operator's to create (as worker-manager assumes)."""
        key = group.lower()
        if key == self._p.resource_group.lower():
            return
        with self._lock:
            if key in self._ready:
                return
            group_lock = self._group_locks.setdefault(key, threading.Lock())
        with group_lock:
            with self._lock:
                if key in self._ready:
                    return
            groups = self._p.clients.resources.resource_groups
            exists = self._p.gate.call(
                "ResourceGroups_CheckExistence", groups.check_existence, group
            )
            if not exists:
                self._p.gate.call(
                    "ResourceGroups_CreateOrUpdate",
                    groups.create_or_update,
                    group,
                    {"location": where},
                )
                log(
                    "azure-resource-group-created", provider=self._p.id, group=group, location=where
                )
            with self._lock:
                self._ready.add(key)

    def _put(self, ref: DeploymentRef, body: dict[str, Any]) -> Any:
        deployments = self._p.clients.deployments.deployments
        return deployments.begin_create_or_update(
            ref.resource_group, ref.name, body, polling=False
        ).result()

    # -- list --------------------------------------------------------------------------------

    def instances(
        self, region: str, vms: Sequence[CloudInstance], groups: Sequence[str]
    ) -> list[CloudInstance]:
        """The scan unit's workers: its VMs joined with the deployments of `groups` (where the
        scan's records say ARM workers are), and the leftovers a sweep due now finds."""
        if not groups:
            return list(vms)
        deployments = [
            d
            for group in groups
            for d in self._list(group)
            if same_region(d.tags.get(TAG_WORKER_GROUP), region)
        ]
        now = datetime.now(UTC)
        found = join(
            self._with_group_data(vms),
            deployments,
            subscription=self._p.subscription_id,
            region=region,
            now=now,
        )
        by_worker = {d.worker_id: d for d in deployments if d.worker_id}
        found = [self._with_record(i, by_worker.get(i.worker_id or "")) for i in found]
        busy = {d.worker_id for d in deployments if d.phase is Phase.IN_FLIGHT and d.worker_id}
        busy |= {v.worker_id for v in vms if v.worker_id}
        return found + self.sweep.due(groups, region, busy)

    def _with_record(
        self, instance: CloudInstance, deployment: DeploymentView | None
    ) -> CloudInstance:
        """A worker whose deployment ended carries what it made, and a listed VM the OS disk
        it made, for its row to keep."""
        record: dict[str, Any] = {}
        os_disk = instance.provider_data.get(OS_DISK_KEY)
        if isinstance(os_disk, str) and os_disk:
            # Named by no operation, output or tag: only the listed VM says which it is.
            record[OS_DISK_KEY] = os_disk
        if deployment is not None and deployment.phase in (Phase.SUCCEEDED, Phase.FAILED):
            made = self._made(deployment)
            if made is not None:
                record.update(made.adding(*record.values()).data())
        return replace(instance, record=record) if record else instance

    def _made(self, deployment: DeploymentView) -> Made | None:
        subscription = self._p.subscription_id
        if deployment.phase is Phase.SUCCEEDED:
            return made_by(deployment, subscription)
        ref = deployment.ref
        ended = deployment.ended_at.isoformat() if deployment.ended_at else ""
        key = (ref.resource_group.lower(), ref.name.lower(), ended)
        with self._lock:
            known = self._failed.get(key)
        if known is not None:
            return known
        try:
            operations = self._operations(ref)
        except CloudError as error:
            # Not recorded this time: the deployment is kept until teardown, which reads it.
            log("arm-operations-unread", provider=self._p.id, deployment=ref.name, error=str(error))
            return None
        made = made_by(deployment, subscription, operations)
        with self._lock:
            if len(self._failed) >= FAILED_REMEMBERED:
                self._failed.pop(next(iter(self._failed)))
            self._failed[key] = made
        return made

    def _operations(self, ref: DeploymentRef) -> list[Mapping[str, Any]]:
        operations = self._p.all_pages(
            "DeploymentOperations_List",
            lambda: self._p.clients.deployments.deployment_operations.list(
                ref.resource_group, ref.name
            ),
        )
        return [o.as_dict() if hasattr(o, "as_dict") else dict(o) for o in operations]

    # -- recorded ----------------------------------------------------------------------------

    def recorded(self, instances: Sequence[CloudInstance]) -> None:
        """Rows now hold what these deployments made: delete each that succeeded unless it is
        kept, as worker-manager does once a deployment succeeded (ARM keeps 800 per group and
        prunes the oldest itself). A failed one stays until its worker is torn down."""
        doomed = []
        for instance in instances:
            ref, made = deployment_ref(instance.provider_data), made_of(instance.record)
            if ref is not None and made is not None and made.succeeded and not ref.keep:
                doomed.append(ref)
        list(self._p.pool.map(carry(self._delete_after_success), doomed))

    def _delete_after_success(self, ref: DeploymentRef) -> None:
        try:
            self._deletes.deployment(ref)
        except CloudError as error:
            # Listed again at the next scan, and deleted then.
            log(
                "arm-deployment-delete-failed",
                provider=self._p.id,
                deployment=ref.name,
                error=str(error),
            )

    def _with_group_data(self, vms: Sequence[CloudInstance]) -> list[CloudInstance]:
        """A VM in an ARM group outside the provider's carries where its deployment would be,
        so an orphan's teardown looks there."""
        own = self._p.resource_group.lower()
        out = []
        for vm in vms:
            parsed = parse_resource_id(vm.cloud_id)
            if parsed is None or parsed.resource_group.lower() == own or not vm.worker_id:
                out.append(vm)
                continue
            ref = DeploymentRef(parsed.resource_group, deployment_name(parsed.name))
            out.append(replace(vm, provider_data={**vm.provider_data, **ref.data()}))
        return out

    def _list(self, group: str) -> list[DeploymentView]:
        deployments = self._p.clients.deployments.deployments
        try:
            items = self._p.all_pages(
                "Deployments_ListByResourceGroup",
                lambda: deployments.list_by_resource_group(group),
            )
        except CloudError as error:
            if error.category is not ErrorCategory.NOT_FOUND:
                raise
            # The group is gone (deleted by hand, or a row's group that never was): so are its
            # deployments. Every scan would fail on it otherwise, and the scanner stop.
            log("arm-group-missing", provider=self._p.id, group=group, error=error.code)
            return []
        views = []
        for item in items:
            raw = item.as_dict() if hasattr(item, "as_dict") else dict(item)
            if not self._p.owns_tags(as_mapping(raw.get("tags"))):
                continue
            views.append(view(self._p.id, group, raw))
        return views

    # -- lookup ------------------------------------------------------------------------------

    def lookup(self, refs: Sequence[tuple[WorkerRef, DeploymentRef]]) -> dict[str, CloudInstance]:
        """Rows of ARM workers the list did not show (it lists every group a row names, so
        they are few): a GET of the deployment, and of the VM where the deployment does not
        decide."""
        found: dict[str, CloudInstance] = {}
        answers = self._p.pool.map(carry(lambda pair: self._lookup_one(*pair)), refs)
        for (worker, _), instance in zip(refs, answers, strict=True):
            if instance is not None:
                found[worker.worker_id] = instance
        return found

    def find_unrecorded(
        self, refs: Sequence[WorkerRef], vm_names: Mapping[str, str]
    ) -> dict[str, CloudInstance]:
        """Intents whose create answer was lost (no deployment on their rows) and no VM in the
        provider's group: their deployments may be in any group, the provider's too (one still
        running, or failed before its VM). Every group of the subscription is listed once for
        deployments of this wm deployment named after them; found ones are looked up as
        recorded ones. Only unresolved intents pay for this, and they are rare."""
        wanted = {deployment_name(vm_names[r.worker_id]).lower(): r for r in refs}
        groups = self._p.all_pages(
            "ResourceGroups_List", lambda: self._p.clients.resources.resource_groups.list()
        )
        pairs: list[tuple[WorkerRef, DeploymentRef]] = []
        for group in groups:
            name = getattr(group, "name", None) or as_mapping(group).get("name")
            if not name:
                continue
            for deployment in self._list(str(name)):
                worker = wanted.pop(deployment.ref.name.lower(), None)
                if worker is not None:
                    pairs.append((worker, deployment.ref))
            if not wanted:
                break
        return self.lookup(pairs) if pairs else {}

    def _lookup_one(self, worker: WorkerRef, ref: DeploymentRef) -> CloudInstance | None:
        made = made_of(worker.provider_data)
        if made is not None:
            # The row knows what the deployment made: the deployment itself may be gone.
            vm = self._p.vm_instance(ref.resource_group, ref.vm_name, worker.region)
            if vm is not None:
                return replace(vm, provider_data={**vm.provider_data, **ref.data()})
            return gone_instance(worker, ref, self._p.subscription_id)
        deployment = self._get(ref)
        if deployment is not None and deployment.phase is Phase.FAILED:
            return self._stands_for(deployment, worker)
        vm = self._p.vm_instance(ref.resource_group, ref.vm_name, worker.region)
        if vm is not None:
            if deployment is not None and deployment.ref.keep:
                ref = replace(ref, keep=True)
            return replace(vm, provider_data={**vm.provider_data, **ref.data()})
        if deployment is None or deployment.phase is Phase.GONE:
            # Its OS disk may be left (a template that keeps it): the teardown deletes it.
            left = os_disk_of(worker.provider_data)
            return gone_instance(worker, ref, self._p.subscription_id) if left else None
        return self._stands_for(deployment, worker)

    def _stands_for(self, deployment: DeploymentView, worker: WorkerRef) -> CloudInstance | None:
        return deployment_instance(
            deployment,
            subscription=self._p.subscription_id,
            region=worker.region,
            now=datetime.now(UTC),
            listing=False,
        )

    def _get(self, ref: DeploymentRef) -> DeploymentView | None:
        deployments = self._p.clients.deployments.deployments
        try:
            item = self._p.gate.call(
                "Deployments_Get", deployments.get, ref.resource_group, ref.name
            )
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return None
            raise
        found = view(self._p.id, ref.resource_group, item.as_dict())
        if not self._p.owns_tags(found.tags):
            return None  # a deployment of that name that is not this wm's: never touched
        return found

    # -- terminate ---------------------------------------------------------------------------

    def terminate(self, worker: WorkerRef, ref: DeploymentRef) -> TerminateResult:
        """Delete what the worker's deployment made, VM first, then the deployment unless
        it is kept; gone once ARM shows none of it. A deployment still running is left to
        end first (ARM refuses to delete it, and it may still create)."""
        made = made_of(worker.provider_data)
        if made is not None:
            return self._terminate_recorded(worker, ref, made)
        try:
            deployment = self._get(ref)
            if deployment is not None and deployment.phase is Phase.IN_FLIGHT:
                return TerminateResult(worker.worker_id, gone=False, nothing_sent=True)
            gone, results = self._deletes.plan(self._plan(worker, ref, deployment))
            keep = ref.keep or (deployment is not None and deployment.ref.keep)
            if gone and deployment is not None and deployment.phase is not Phase.GONE and not keep:
                results.append(self._deletes.deployment(ref))
            sent = any(r in (Deleted.DONE, Deleted.UNDER_WAY) for r in results)
            return TerminateResult(worker.worker_id, gone=gone, nothing_sent=not sent)
        except CloudError as error:
            return TerminateResult(worker.worker_id, gone=False, error=error)

    def _terminate_recorded(
        self, worker: WorkerRef, ref: DeploymentRef, made: Made
    ) -> TerminateResult:
        """Tear down from the row's record, without reading the deployment (wm deleted it
        after success, or ARM pruned it); then delete the deployment unless it is kept (gone
        already: a 404 or a 204)."""
        try:
            extra = os_disk_of(worker.provider_data)
            plan = teardown_plan([], [self._vm_id(worker, ref), *made.ids, *extra])
            gone, results = self._deletes.plan(plan)
            if gone and not ref.keep:
                results.append(self._deletes.deployment(ref))
            sent = any(r in (Deleted.DONE, Deleted.UNDER_WAY) for r in results)
            return TerminateResult(worker.worker_id, gone=gone, nothing_sent=not sent)
        except CloudError as error:
            return TerminateResult(worker.worker_id, gone=False, error=error)

    def _vm_id(self, worker: WorkerRef, ref: DeploymentRef) -> str:
        """The worker's VM: the id the cloud named, else the one wm's names give."""
        vm_id = worker.cloud_id or ""
        parsed = parse_resource_id(vm_id)
        if parsed is None or parsed.type != VM_TYPE:
            vm_id = vm_resource_id(self._p.subscription_id, ref.resource_group, ref.vm_name)
        return vm_id

    def _plan(
        self, worker: WorkerRef, ref: DeploymentRef, deployment: DeploymentView | None
    ) -> Teardown:
        known = [self._vm_id(worker, ref), *os_disk_of(worker.provider_data)]
        if deployment is None or deployment.phase is Phase.GONE:
            return teardown_plan([], known)  # what else it made is found by its tags
        return teardown_plan(self._operations(ref), [*known, *deployment.resource_ids])

    def delete_leftover(self, worker: WorkerRef) -> TerminateResult:
        """An orphan NIC, public IP or disk (a leftover): delete it."""
        try:
            result = self._deletes.by_id(worker.cloud_id or "")
        except CloudError as error:
            return TerminateResult(worker.worker_id, gone=False, error=error)
        if result.gone:
            self.sweep.forget(worker.cloud_id or "")
        return TerminateResult(
            worker.worker_id, gone=result.gone, nothing_sent=result is Deleted.ABSENT
        )
