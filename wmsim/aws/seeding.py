"""What a sim's cloud holds before wm asks: instances seeded in-process (large fleets for scale
tests and benchmarks, without moto's per-request cost), and images, subnets and security groups
with the ids a real deployment's launch configs name (EC2 and moto choose those ids
themselves; the sim takes them)."""

from __future__ import annotations

import threading
import time

from wmsim.aws.moto_models import DEFAULT_REGION, add_image, given_id, new_instances_found_fast


class Ec2Seeding:
    """SimEc2's out-of-band making (its state lives on SimEc2, wmsim/aws/ec2.py)."""

    _lock: threading.RLock

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
            with new_instances_found_fast(backend):
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
            self._touched(only=[])  # new instances (and their volumes) only
            self._sync(time.monotonic())
            self._render_ahead(region, reservation)
            return [inst.id for inst in reservation.instances]

    def register_image(self, image_id: str, region: str = DEFAULT_REGION) -> None:
        """Make an image exist in a region, so that RunInstances accepts it (any id, even one
        EC2 would call malformed, as Taskcluster's fixtures use)."""
        with self._lock:
            self._prepare_region(region)
            add_image(self._backend(region), region, image_id)

    def add_subnet(self, subnet_id: str, availability_zone: str) -> None:
        """Make a subnet of the region's default VPC with the id given (a real deployment's
        `subnet-…`, which EC2 chose when it was made and a launch config names), so that
        RunInstances accepts it. EC2 and moto choose subnet ids themselves; the sim takes one."""
        region = availability_zone[:-1]
        with self._lock:
            self._prepare_region(region)
            backend = self._backend(region)
            if any(subnet_id in subnets for subnets in backend.subnets.values()):
                return
            vpc = backend.get_default_vpc()
            taken = sum(len(subnets) for subnets in backend.subnets.values())
            # The default VPC is 172.31.0.0/16 with a /20 per zone from the bottom: from the
            # top half, a /24 each.
            cidr = f"172.31.{128 + taken % 128}.0/24"
            with given_id("moto.ec2.models.subnets", "random_subnet_id", subnet_id):
                backend.create_subnet(vpc.id, cidr, availability_zone=availability_zone)

    def add_security_group(self, group_id: str, region: str) -> None:
        """Make a security group of the region's default VPC with the id given (a real
        deployment's `sg-…`), named after it. EC2 and moto choose group ids; the sim takes one."""
        with self._lock:
            self._prepare_region(region)
            backend = self._backend(region)
            if backend.get_security_group_from_id(group_id) is not None:
                return
            with given_id("moto.ec2.models.security_groups", "random_security_group_id", group_id):
                backend.create_security_group(group_id.removeprefix("sg-"), f"seeded {group_id}")
