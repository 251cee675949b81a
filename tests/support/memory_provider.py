"""A Provider held in memory, for pass logic tests that need no cloud (the clouds' own tests
and the provisioner's end-to-end tests use the simulated clouds)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from wm.config.loader import GateConfig
from wm.errors import CloudError, ErrorCategory, ErrorScope
from wm.model import CloudInstance, LaunchSpec, Offering, WorkerRef, WorkerState
from wm.providers.base import (
    NO_RECORDS,
    Answered,
    LaunchBatch,
    LaunchResult,
    TerminateResult,
    UnitRecords,
    not_listening,
)
from wm.providers.gate import Gate


class MemoryProvider:
    create_batch_max = 100  # as the clouds' kinds have it

    def __init__(self, provider_id: str, regions: tuple[str, ...] = ("r1",)) -> None:
        self.id = provider_id
        self.regions = regions
        self.instances: dict[str, CloudInstance] = {}  # worker id -> instance
        self.create_calls: list[LaunchBatch] = []
        self.fail_launch_configs: dict[str, CloudError] = {}
        self.raise_on_create: Exception | None = None
        # What scans said their rows now hold (worker ids of each call), and a test's look then.
        self.recorded_calls: list[list[str | None]] = []
        self.on_recorded: Callable[[Sequence[CloudInstance]], None] | None = None
        self._lock = threading.Lock()
        # Calls never go through it; the passes read its state (paused) and timing from it.
        self.gate = Gate(provider_id, MEMORY_GATE, _unclassified(provider_id))

    def create(self, batch: LaunchBatch, answered: Answered = not_listening) -> list[LaunchResult]:
        with self._lock:
            self.create_calls.append(batch)
        if self.raise_on_create:
            raise self.raise_on_create
        error = self.fail_launch_configs.get(batch.spec.launch_config_id)
        results = []
        for index, intent in enumerate(batch.intents):
            if error:
                results.append(LaunchResult(intent.worker_id, None, error))
                continue
            with self._lock:
                instance = self.instances.setdefault(
                    intent.worker_id,
                    CloudInstance(
                        worker_id=intent.worker_id,
                        cloud_id=f"i-{intent.worker_id}",
                        region=batch.spec.region,
                        state=WorkerState.REQUESTED,
                        pool_id=batch.pool_id,
                        launch_config_id=batch.spec.launch_config_id,
                        tc_worker_id=f"i-{intent.worker_id}",
                    ),
                )
            results.append(
                LaunchResult(
                    intent.worker_id,
                    instance.cloud_id,
                    launch_index=index,
                    tc_worker_id=instance.tc_worker_id,
                )
            )
        return results

    def list_pages(
        self, region: str, records: UnitRecords = NO_RECORDS
    ) -> Iterator[list[CloudInstance]]:
        yield self.list_instances(region, records)

    def list_instances(self, region: str, records: UnitRecords = NO_RECORDS) -> list[CloudInstance]:
        return [i for i in self.instances.values() if i.region == region]

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        return {
            r.worker_id: self.instances[r.worker_id] for r in refs if r.worker_id in self.instances
        }

    def recorded(self, instances: Sequence[CloudInstance]) -> None:
        self.recorded_calls.append([i.worker_id for i in instances])
        if self.on_recorded is not None:
            self.on_recorded(instances)

    def terminate(self, refs: Sequence[WorkerRef]) -> list[TerminateResult]:
        for ref in refs:
            self.instances.pop(ref.worker_id, None)
        return [TerminateResult(r.worker_id, True) for r in refs]

    def offering(self, launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
        return None  # a memory cloud has no market

    def error_scope(self, error: CloudError, spec: LaunchSpec) -> ErrorScope | None:
        return None

    def failed_launch(self, reason: str | None) -> CloudError | None:
        return None  # every launch it takes, it makes

    def close(self) -> None:
        pass


def quota_error(provider_id: str) -> CloudError:
    return CloudError(provider_id, ErrorCategory.QUOTA, "InstanceLimitExceeded", "quota reached")


def capacity_error(provider_id: str) -> CloudError:
    return CloudError(
        provider_id,
        ErrorCategory.CAPACITY,
        "InsufficientInstanceCapacity",
        "We currently do not have sufficient m5.large capacity in the Availability Zone you "
        "requested (us-east-1a).",
    )


# An unanswered create of this provider is looked up after at most one second.
MEMORY_GATE = GateConfig(timeout_s=1.0, max_attempts=1)


def _unclassified(provider_id: str):
    def classify(exc: BaseException) -> CloudError:
        return CloudError(provider_id, ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))

    return classify
