"""The simulated lifecycle of EC2 instances over moto's models: moto creates and terminates at
once, the sim makes boot and delete take their time, keeps terminated instances listed for a
while, and touches on each request only the instances whose state is due to change."""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from wmsim.aws.moto_models import KNOWN_IMAGES, MOTO_STATES, add_image, instance_tags, set_state
from wmsim.behaviour import Faults, Preemptions, SimVm, lifecycle_state

TERMINATED_VISIBLE_S = 3600.0  # EC2 keeps terminated instances listed for about an hour
SPOT_TERMINATION = ("Server.SpotInstanceTermination", "Spot instance termination")
INTERNAL_ERROR = ("Server.InternalError", "Internal error")


@dataclass
class InstanceLife:
    """What the sim remembers about one instance to derive its state."""

    seq: int  # creation order: DescribeInstances pages follow it
    created_at: float
    deleted_at: float | None = None  # TerminateInstances (or a kill) seen
    gone_at: float | None = None  # reached terminated
    pinned: str | None = None  # a state set out of band (kill); lifecycle leaves it alone


_PHASE_STATES = {
    "pending": "pending",
    "running": "running",
    "stopping": "shutting-down",
    "gone": "terminated",
}


def kill_reason(reason: str, spot: bool) -> tuple[str, str]:
    if "." in reason and " " not in reason:
        return reason, reason.split(".", 1)[1]  # already an EC2 code, e.g. Server.ScheduledStop
    if reason == "preempted" and spot:
        return SPOT_TERMINATION
    return INTERNAL_ERROR[0], f"{INTERNAL_ERROR[1]} ({reason})"


def sim_vm(region: str, inst: Any) -> SimVm:
    tags = instance_tags(inst)
    return SimVm(
        cloud_id=inst.id,
        name=tags.get("Name", inst.id),
        region=region,
        state=MOTO_STATES[inst.state][1],
        tags=tags,
        spot=inst.lifecycle == "spot",
        launch_index=int(inst.ami_launch_index),
    )


def vm_json(vm: SimVm) -> dict[str, Any]:
    data = asdict(vm)
    data["tags"] = dict(vm.tags)
    return data


class Ec2Lifecycle:
    """SimEc2's instances in moto's models, brought to their simulated states (`_sync`).
    State it reads and keeps lives on SimEc2 (wmsim/aws/ec2.py), which sets it up."""

    account_id: str
    faults: Faults
    preemptions: Preemptions
    terminated_visible_s: float

    def _backend(self, region: str) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.account_id][region]

    def _prepare_region(self, region: str) -> None:
        backend = self._backend(region)
        if id(backend) not in self._prepared:
            # A backend starts with no AMI (`skip_public_amis`): the sim's own few are added.
            for image_id in KNOWN_IMAGES:
                add_image(backend, region, image_id)
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
            if instance_tags(inst).get("Name") == cloud_id_or_name:
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
                life = self._life[inst.id] = InstanceLife(self._seq, now)
                changed = True
                if inst.lifecycle == "spot":
                    self.preemptions.schedule(inst.id, now + behaviour.boot_s)
            changed |= self._sync_one(region, inst, life, now)
        for gone in set(self._life) - set(self._where):
            del self._life[gone]
            changed = True
        if changed:
            self._generation += 1

    def _sync_one(self, region: str, inst: Any, life: InstanceLife, now: float) -> bool:
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
                    set_state(inst, _PHASE_STATES[phase])
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

    def _next_change(self, inst: Any, life: InstanceLife, now: float) -> float | None:
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
