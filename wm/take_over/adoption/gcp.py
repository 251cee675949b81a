"""GCE's take-over of a legacy worker-manager's instances (wm/take_over/adoption/base.py).

worker-manager labels what it launches for a provider `created-by: taskcluster-wm-<provider>`
and `managed-by: taskcluster`, and writes the exact pool, provider and root URL into the
instance's `taskcluster` metadata item (services/worker-manager/src/providers/google.js). GCE
filters on the labels server-side, so a unit's legacy listing is one more paged instances.list;
an imported row's instance is read by its name, or by its numeric id (its Taskcluster workerId),
which GCE takes in place of the name. Every call goes through the provider's gated calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from wm.kinds.base import MANAGED_BY
from wm.kinds.gcp import GCE_METADATA_KEY
from wm.model import CloudInstance, WorkerRef
from wm.take_over.adoption.base import imported_tc_worker_id, made_by_wm
from wm.take_over.marks import imported_worker_id


class GcpHost(Protocol):
    """What the adopter uses of the GCE provider (wm/providers/gcp/provider.py): its gated,
    paged instances.list and instances.get, and how it reads an instance."""

    id: str
    root_url: str

    def pages(self, region: str, filter_: str) -> Iterator[list[Any]]: ...

    def get(self, zone: str, name: str) -> Any | None: ...

    def cloud_instance(self, instance: Any, zone: str) -> CloudInstance: ...


_LEGACY_UNSAFE = re.compile(r"[^a-zA-Z0-9-]")


def legacy_created_by(provider_id: str) -> str:
    """The created-by label worker-manager gives what it makes for this provider: its
    [^a-zA-Z0-9-] made `-`, and (unlike its other labels) not lowercased (google.js)."""
    return _LEGACY_UNSAFE.sub("-", f"taskcluster-wm-{provider_id}")


def legacy_pool(
    labels: Mapping[str, str], metadata: Mapping[str, str], provider_id: str, root_url: str
) -> str | None:
    """The pool of an instance worker-manager made for this provider of this deployment: its
    labels say worker-manager's and this provider's, and its `taskcluster` metadata item (the
    only place the pool id is exact: labels are escaped and lowercased) names the provider and
    the root URL; None for anything else. wm's own instances carry these labels and metadata
    too: `GcpAdoption` tells them apart by wm's labels."""
    if labels.get("created-by") != legacy_created_by(provider_id):
        return None
    if labels.get("managed-by") != MANAGED_BY:
        return None
    try:
        boot = json.loads(metadata.get(GCE_METADATA_KEY) or "")
    except ValueError:
        return None
    if not isinstance(boot, Mapping) or boot.get("providerId") != provider_id:
        return None
    if str(boot.get("rootUrl") or "").rstrip("/") != root_url.rstrip("/"):
        return None
    pool = boot.get("workerPoolId")
    return pool if isinstance(pool, str) and pool else None


class GcpAdoption:
    """The legacy's instances of one GCE provider, read through that provider's calls."""

    def __init__(
        self,
        provider_id: str,
        root_url: str,
        pages: Callable[[str, str], Iterator[list[Any]]],
        get: Callable[[str, str], Any | None],
        cloud_instance: Callable[[Any, str], CloudInstance],
    ) -> None:
        self.provider_id = provider_id
        self._root_url = root_url
        self._pages = pages
        self._get = get
        self._cloud_instance = cloud_instance
        self._filter = (
            f'labels.created-by = "{legacy_created_by(provider_id)}" AND '
            f'labels.managed-by = "{MANAGED_BY}"'
        )

    def pool_of(
        self, tags: Mapping[str, str], metadata: Mapping[str, str] | None = None
    ) -> str | None:
        if made_by_wm(tags):
            return None
        return legacy_pool(tags, metadata or {}, self.provider_id, self._root_url)

    def pages(self, region: str) -> Iterator[list[CloudInstance]]:
        # One more listing, filtered by GCE on worker-manager's own labels.
        for items in self._pages(region, self._filter):
            yield [
                legacy
                for instance in items
                if (legacy := self.instance(instance, region)) is not None
            ]

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        found = {ref.worker_id: self.lookup_one(ref) for ref in refs}
        return {worker_id: item for worker_id, item in found.items() if item is not None}

    def lookup_one(self, ref: WorkerRef) -> CloudInstance | None:
        """An imported row's instance, if it is still the legacy's of this provider."""
        found = self._get(ref.region, self.teardown_name(ref))
        return None if found is None else self.instance(found, ref.region)

    def teardown_name(self, ref: WorkerRef) -> str:
        """How to address an imported worker's instance: by the name a listing saw, else by
        worker-manager's workerId (its numeric id), which GCE takes in place of the name."""
        return str(ref.provider_data.get("name") or imported_tc_worker_id(ref.worker_id))

    def instance(self, instance: Any, zone: str) -> CloudInstance | None:
        """An instance worker-manager made for this provider, as an imported worker (keyed as
        `wm import` keys its row); None for anything else (wm's own included)."""
        labels = dict(instance.labels)
        if made_by_wm(labels):
            return None
        metadata = {item.key: item.value for item in instance.metadata.items}
        pool = legacy_pool(labels, metadata, self.provider_id, self._root_url)
        if pool is None:
            return None
        return replace(
            self._cloud_instance(instance, zone),
            worker_id=imported_worker_id(pool, zone, str(instance.id)),
            pool_id=pool,
            launch_config_id=labels.get("launch-config-id"),
            batch_token=None,
            legacy=True,
        )


def adopt(provider: GcpHost) -> GcpAdoption:
    """The take-over of one GCE provider, reading through its calls and gate."""
    return GcpAdoption(
        provider.id, provider.root_url, provider.pages, provider.get, provider.cloud_instance
    )
