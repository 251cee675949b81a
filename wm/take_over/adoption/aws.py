"""EC2's take-over of a legacy worker-manager's instances (wm/take_over/adoption/base.py).

worker-manager tags what it launches for a provider `CreatedBy: taskcluster-wm-<provider>`,
`ManagedBy: taskcluster` and its pool as `WorkerPoolId` (services/worker-manager/src/providers/
aws.js); EC2 filters on those tags server-side, so a unit's legacy listing is one more paged
DescribeInstances, and an imported row is found by its instance id (its Taskcluster workerId)
in one call per chunk of ids. Every call goes through the provider's gated `describe_pages`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from wm.kinds.base import MANAGED_BY
from wm.model import CloudInstance, WorkerRef
from wm.take_over.adoption.base import imported_tc_worker_id, made_by_wm
from wm.take_over.marks import imported_worker_id

# Instance ids in one DescribeInstances filter (EC2 accepts up to 200), as the provider's own.
LOOKUP_CHUNK_SIZE = 200


class AwsHost(Protocol):
    """What the adopter uses of the EC2 provider (wm/providers/aws/provider.py): its id and
    its gated, paged DescribeInstances, and how it reads an instance."""

    id: str

    def describe_pages(
        self,
        region: str,
        filters: list[dict[str, Any]],
        accept: Callable[[Mapping[str, str]], object] | None = None,
    ) -> Iterator[list[dict[str, Any]]]: ...

    def cloud_instance(self, region: str, raw: dict[str, Any]) -> CloudInstance: ...


# (region, filters, accept) -> pages of raw instances, through the provider's gate.
DescribePages = Callable[
    [str, list[dict[str, Any]], Callable[[Mapping[str, str]], object]],
    Iterator[list[dict[str, Any]]],
]


def legacy_created_by(provider_id: str) -> str:
    """The CreatedBy tag worker-manager puts on what it makes for this provider."""
    return f"taskcluster-wm-{provider_id}"


def legacy_pool(tags: Mapping[str, str], provider_id: str) -> str | None:
    """The pool of an instance worker-manager made for this provider, from its tags (exactly
    its WorkerPoolId); None for anything else. EC2 keeps the rootUrl only in the user data, which
    a listing does not show: the CreatedBy tag names the provider, one per deployment's account.
    wm's own instances carry these tags too: `AwsAdoption.pool_of` tells them apart by wm's."""
    if tags.get("CreatedBy") != legacy_created_by(provider_id):
        return None
    if tags.get("ManagedBy") != MANAGED_BY:
        return None
    return tags.get("WorkerPoolId") or None


class AwsAdoption:
    """The legacy's instances of one EC2 provider, read through that provider's calls."""

    def __init__(
        self,
        provider_id: str,
        describe_pages: DescribePages,
        cloud_instance: Callable[[str, dict[str, Any]], CloudInstance],
        chunk_size: int,
    ) -> None:
        self.provider_id = provider_id
        self._describe_pages = describe_pages
        self._cloud_instance = cloud_instance
        self._chunk_size = chunk_size

    def pool_of(self, tags: Mapping[str, str]) -> str | None:
        if made_by_wm(tags):
            return None
        return legacy_pool(tags, self.provider_id)

    def pages(self, region: str) -> Iterator[list[CloudInstance]]:
        # One more listing, filtered by EC2 on worker-manager's own tags.
        for raws in self._raw_pages(region, []):
            yield [self._legacy(region, raw) for raw in raws]

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        by_region: dict[str, list[WorkerRef]] = defaultdict(list)
        for ref in refs:
            by_region[ref.region].append(ref)
        return {
            worker_id: self._legacy(region, raw)
            for region, group in by_region.items()
            for worker_id, raw in self.locate(region, group).items()
        }

    def locate(self, region: str, refs: Sequence[WorkerRef]) -> dict[str, dict[str, Any]]:
        """The raw instances of imported rows of one region, by worker id: found by their
        instance id (wm's tags are not on them), a chunk of ids a call."""
        ids = {r.cloud_id or imported_tc_worker_id(r.worker_id): r for r in refs}
        found: dict[str, dict[str, Any]] = {}
        chosen = sorted(ids)
        for start in range(0, len(chosen), self._chunk_size):
            chunk = chosen[start : start + self._chunk_size]
            for raws in self._raw_pages(region, chunk):
                for raw in raws:
                    found[ids[raw["InstanceId"]].worker_id] = raw
        return found

    def instance(self, region: str, raw: dict[str, Any]) -> CloudInstance | None:
        """A raw instance as the scan sees it if it is the legacy's (under its import key),
        else None."""
        if self.pool_of(_tags(raw)) is None:
            return None
        return self._legacy(region, raw)

    def _legacy(self, region: str, raw: dict[str, Any]) -> CloudInstance:
        instance = self._cloud_instance(region, raw)
        pool = self.pool_of(_tags(raw))
        if pool is None:
            return instance
        return replace(
            instance,
            worker_id=imported_worker_id(pool, region, raw["InstanceId"]),
            pool_id=pool,
            launch_config_id=None,
            batch_token=None,
            launch_index=None,
            legacy=True,
        )

    def _raw_pages(self, region: str, ids: Sequence[str]) -> Iterator[list[dict[str, Any]]]:
        filters = [
            {"Name": "tag:CreatedBy", "Values": [legacy_created_by(self.provider_id)]},
            {"Name": "tag:ManagedBy", "Values": [MANAGED_BY]},
        ]
        if ids:
            filters.append({"Name": "instance-id", "Values": list(ids)})
        return self._describe_pages(region, filters, self.pool_of)


def _tags(raw: Mapping[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in raw.get("Tags", [])}


def adopt(provider: AwsHost) -> AwsAdoption:
    """The take-over of one EC2 provider, reading through its calls and gate."""
    return AwsAdoption(
        provider.id, provider.describe_pages, provider.cloud_instance, LOOKUP_CHUNK_SIZE
    )
