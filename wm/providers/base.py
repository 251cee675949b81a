"""The provider contract: the only place its behaviour is described.

A provider is one configured cloud account. wm drives it as a reconciler does: one bulk read
per scan unit (`list_pages`), targeted look-ups for what a list did not show, and batch
writes keyed by ids that wm chose before calling the cloud. Assumptions every implementation
shares:

- Clouds are eventually consistent: an instance created a moment ago may be missing from a
  list, and a deleted one may still appear. Callers allow for both.
- Creates are asynchronous: `create` returns once the cloud accepted the request, not when the
  instance runs. Long-running operations are never awaited one after another.
- Creates and terminates are idempotent: calling again with the same worker ids and tokens
  never makes a second instance, and terminating what is gone is a success.
- Launch failures are data: `create` returns a `LaunchResult` with an error per worker instead
  of raising, so one bad launch config never stops a pass. `list_pages` (as it is iterated),
  `list_instances`, `lookup` and `terminate` raise `CloudError` when the call itself fails.
- A listing is streamed: `list_pages` asks the cloud for a page only once its caller is done
  with the one before, and keeps nothing of it, so a scan holds one page of a listing of
  100,000 VMs, not the listing (Azure's join of its models' and statuses' lists keeps what
  it needs of each listed model, not the SDK's model, until its status page comes; where ARM
  deployments make its workers, the unit's VMs joined with its deployments are one page).
- Boot data is Taskcluster's: every VM gets what worker-runner reads (its kind's boot data,
  wm/kinds/<kind>.py), and results and listings name the VM's Taskcluster workerId
  (`tc_worker_id`), which the database keeps beside wm's own worker id.
- Ownership is by tag: every resource carries the deployment id, provider id, pool id, worker
  id and launch config id; listing filters on the deployment tag, and a resource is a
  provider's only when its provider tag names it too (`owned`), so another deployment's
  resources, and those of another provider of the same deployment sharing the cloud account,
  are never seen or touched.
- Every SDK call goes through the provider's `Gate` (wm/providers/gate.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol

from wm.errors import CloudError, ErrorScope
from wm.model import CloudInstance, LaunchSpec, Offering, WorkerRecord, WorkerRef

if TYPE_CHECKING:
    from wm.providers.gate import Gate

# Tag (label) keys written on every cloud resource. GCE labels allow [a-z0-9_-] only.
TAG_DEPLOYMENT = "wm-deployment"
# The provider id: verbatim on EC2 and Azure, on GCE as wm.config.provider_ids.gce_label writes it.
TAG_PROVIDER = "wm-provider"
TAG_POOL = "wm-pool"
TAG_WORKER = "wm-worker"
TAG_LAUNCH_CONFIG = "wm-launch-config"
TAG_BATCH = "wm-batch"


def owned(tags: Mapping[str, str], deployment: str, provider: str) -> bool:
    """Whether a resource with these tags (labels) is this deployment's and this provider's;
    `provider` as the cloud holds it. A resource with no provider tag (made before wm wrote
    one) counts as the provider's that finds it, as all of them did then."""
    return tags.get(TAG_DEPLOYMENT) == deployment and tags.get(TAG_PROVIDER, provider) == provider


def ownership_tags(
    deployment: str,
    provider: str,
    pool: str,
    launch_config: str,
    *,
    worker: str | None = None,
    batch: str | None = None,
) -> dict[str, str]:
    """wm's tags (labels) on what it launches, values as the cloud is to hold them: what `owned`
    and the scans read back. The worker's where the call makes one worker (EC2 tags a batch of
    more by its batch token and launch index instead)."""
    tags = {TAG_DEPLOYMENT: deployment, TAG_PROVIDER: provider, TAG_POOL: pool}
    if worker is not None:
        tags[TAG_WORKER] = worker
    tags[TAG_LAUNCH_CONFIG] = launch_config
    if batch is not None:
        tags[TAG_BATCH] = batch
    return tags


def plain(value: Any) -> Any:
    """A deep copy of a launch config value in plain dicts and lists, so that nothing an SDK
    does to its parameters reaches the launch spec, and read-only mappings serialise."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


@dataclass(frozen=True)
class LaunchIntent:
    """One worker wm has committed to the database and now asks the cloud for."""

    worker_id: str  # chosen by wm; becomes the instance name (GCE, Azure) and a tag
    idempotency_token: str  # GCE requestId; Azure names are derived from worker_id


@dataclass(frozen=True)
class LaunchBatch:
    """Workers of one pool and one launch config, created together where the cloud allows."""

    pool_id: str
    spec: LaunchSpec
    intents: tuple[LaunchIntent, ...]
    batch_token: str  # EC2 ClientToken and batch tag; stable across retries of this batch


@dataclass(frozen=True)
class LaunchResult:
    """What the cloud said about one intent of a batch."""

    worker_id: str
    cloud_id: str | None  # instance id / VM resource id; None when the create failed
    error: CloudError | None = None
    launch_index: int | None = None  # position in the batch, where the cloud uses one
    provider_data: Mapping[str, Any] = field(default_factory=dict)  # kept on the row (e.g. vmId)
    # Taskcluster's workerId, as worker-runner reads it on the VM: EC2 instance id, GCE numeric
    # instance id (decimal), Azure VM name. None when the create failed.
    tc_worker_id: str | None = None


@dataclass(frozen=True)
class UnitRecords:
    """What the database holds about one scan unit, handed to its listing: where a provider's
    config alone does not say where its instances are (Azure: the resource groups ARM
    deployments went into), the rows and the pool definitions do. A provider keeps nothing it
    learnt from its own creates, look-ups or terminates for a later listing: the scanner is
    another process than the provisioner, and a restarted one launched nothing."""

    rows: Sequence[WorkerRecord | WorkerRef] = ()  # the unit's live rows (their provider data)
    # The launch configs of the pools this provider launches for, as their definitions hold
    # them (the provider keeps those of its own kind, in the unit's region).
    launch_configs: Sequence[Mapping[str, Any]] = ()


NO_RECORDS = UnitRecords()  # a listing from the provider's config alone (tools, tests)


# Told one create result the moment its call is answered (`Provider.create`).
Answered = Callable[[LaunchResult], None]
P = ParamSpec("P")


def not_listening(result: LaunchResult) -> None:
    """The `answered` of a caller that reads create's results only when it returns."""


def telling(answered: Answered, job: Callable[P, LaunchResult]) -> Callable[P, LaunchResult]:
    """`job`, telling `answered` its result before returning it."""

    def run(*args: P.args, **kwargs: P.kwargs) -> LaunchResult:
        result = job(*args, **kwargs)
        answered(result)
        return result

    return run


@dataclass(frozen=True)
class TerminateResult:
    worker_id: str
    gone: bool  # the cloud confirms nothing of it is left
    error: CloudError | None = None
    # No delete was sent: nothing was left, or one was under way already (EC2 lists terminated
    # instances for a while; an orphan seen again is not terminated again).
    nothing_sent: bool = False


class Provider(Protocol):
    """One cloud account. Implemented by each kind's package
    (wm/providers/<kind>/provider.py) with the same methods."""

    id: str
    regions: tuple[str, ...]
    gate: Gate  # every SDK call goes through it; its `attempts` count calls per operation
    create_batch_max: int  # workers per create call: its kind's description says how many

    def create(self, batch: LaunchBatch, answered: Answered = not_listening) -> list[LaunchResult]:
        """Ask the cloud for every intent of the batch; one result per intent, in order.

        Where the batch is several calls (an insert or PUT per VM), each intent's result is
        handed to `answered` as soon as its call is answered, from the thread that made it,
        before `create` returns: the provisioner records it then, because the VM may boot and
        register before the batch's last call is answered. A batch that is one call may tell
        nothing; its caller takes the returned results as told.

        Safe to call again with the same batch after a crash: a worker whose instance already
        exists comes back with that instance's id instead of a second instance.
        """
        ...

    def list_pages(
        self, region: str, records: UnitRecords = NO_RECORDS
    ) -> Iterator[Sequence[CloudInstance]]:
        """Every instance of this deployment in one scan unit (with the take-over's
        `adoption`, a legacy worker-manager's too, in pages of their own after wm's), page by
        page at the largest page size, each page asked for once the caller is done with the one
        before. A page may
        be empty. Where to look is the provider's config and `records` (what the database
        holds), never what this process happened to create or look up."""
        ...

    def list_instances(self, region: str, records: UnitRecords = NO_RECORDS) -> list[CloudInstance]:
        """Every page of `list_pages` at once (tools and tests; a scan streams them)."""
        ...

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        """Find the given workers by id or tag; absent from the result means not found."""
        ...

    def terminate(self, refs: Sequence[WorkerRef]) -> list[TerminateResult]:
        """Delete the workers' instances and what belongs to them; one result per ref."""
        ...

    def recorded(self, instances: Sequence[CloudInstance]) -> None:
        """The scan wrote these listed instances' `record` on their rows: what the provider
        kept in the cloud only until then may go (Azure: a succeeded ARM deployment). Failures
        are logged, not raised: the next scan lists and records them again."""
        ...

    def offering(self, launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
        """Where a launch config launches, as the cloud prices it (its kind's description
        reads it); None when it cannot tell."""
        ...

    def error_scope(self, error: CloudError, spec: LaunchSpec) -> ErrorScope | None:
        """Which launches a refusal of a create of `spec` holds for (its kind's errors.py);
        None when it is no capacity or quota refusal."""
        ...

    def failed_launch(self, reason: str | None) -> CloudError | None:
        """The refusal a worker's stop reason records when the cloud failed its launch after
        accepting the create (an ARM deployment's AllocationFailed, a GCE insert operation's
        ZONE_RESOURCE_POOL_EXHAUSTED), classified as a refused create is; None for any other
        reason."""
        ...

    def close(self) -> None:
        """Release clients and connections."""
        ...
