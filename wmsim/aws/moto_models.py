"""moto's EC2 models as the sim holds them: one moto account per sim, regions without moto's
public AMIs but with the sim's few images, moto's slow look-ups made direct, and the reads and
writes of an instance's state, reason, tags and user data."""

from __future__ import annotations

import base64
import contextlib
import io
import sys
import threading
from collections.abc import Iterator
from typing import Any

FIRST_ACCOUNT_ID = 123456789012  # moto's default account: what `wmsim serve` users see
DEFAULT_REGION = "us-east-1"

# moto instance state name -> (EC2 state code, SimVm state)
MOTO_STATES = {
    "pending": (0, "pending"),
    "running": (16, "running"),
    "shutting-down": (32, "stopping"),
    "terminated": (48, "gone"),
    "stopping": (64, "stopping"),
    "stopped": (80, "stopped"),
}
# The images every region of the sim holds (moto's public ones are dropped for speed): the
# defaults of `example_launch_config` and of seeding, and the ids the demo and tests launch.
# Any other image is registered with `register_image` (or POST /_sim/images).
KNOWN_IMAGES = (
    "ami-0abcdef1234567890",
    "ami-0123456789abcdef0",
    "ami-0fedcba9876543210",
    "ami-0a1b2c3d4e5f60718",
)
DEFAULT_IMAGE = KNOWN_IMAGES[0]

_accounts_lock = threading.Lock()
_accounts_in_use: set[str] = set()
_tag_lookup_patched = False


@contextlib.contextmanager
def given_id(module_name: str, generator: str, resource_id: str) -> Iterator[None]:
    """While one resource is made (under the sim's lock): moto's id generator for its kind
    answers the id given instead of a random one."""
    import importlib

    module = importlib.import_module(module_name)
    original = getattr(module, generator)
    setattr(module, generator, lambda *args, **kwargs: resource_id)
    try:
        yield
    finally:
        setattr(module, generator, original)


def add_image(backend: Any, region: str, image_id: str) -> None:
    from moto.ec2.models.amis import Ami

    if image_id not in backend.amis:
        backend.amis[image_id] = Ami(
            backend,
            image_id,
            name=f"wm-sim {image_id}",
            architecture="x86_64",
            virtualization_type="hvm",
            root_device_type="ebs",
            region_name=f"{region}a",
        )


def claim_account() -> str:
    with _accounts_lock:
        candidate = FIRST_ACCOUNT_ID
        while str(candidate) in _accounts_in_use:
            candidate += 1
        _accounts_in_use.add(str(candidate))
        return str(candidate)


def release_account(account_id: str) -> None:
    with _accounts_lock:
        _accounts_in_use.discard(account_id)


def skip_public_amis() -> None:
    """moto makes each region's backend with its 1,301 public AMIs, a volume and a snapshot
    each (~0.2 s a region, paid by the first request there and again after every reset), and
    every instance it creates scans them all to describe its image. wm never lists AMIs:
    `_prepare_region` adds the sim's own few. The effect of moto's
    MOTO_EC2_LOAD_DEFAULT_AMIS=false, without setting the process's environment."""
    from moto.ec2.models.amis import AmiBackend

    AmiBackend._load_amis = lambda self: None


def speed_up_moto_tag_lookup() -> None:
    """moto finds one resource's tags by scanning every tag in the region with regexes, which
    makes describing N instances cost N^2; a dict lookup gives the same answer."""
    global _tag_lookup_patched
    if _tag_lookup_patched:
        return
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    def get_tags(self: Any) -> list[dict[str, str]]:
        resource_id = getattr(self, "id", None)
        tags = self.ec2_backend.tags.get(resource_id) if resource_id else None
        if not tags:
            return []
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
        return [
            {"resource_id": resource_id, "key": k, "value": v, "resource_type": kind}
            for k, v in tags.items()
        ]

    TaggedEC2Resource.get_tags = get_tags
    _tag_lookup_patched = True


@contextlib.contextmanager
def new_instances_found_fast(backend: Any) -> Iterator[None]:
    """While seeding: moto's RunInstances looks up each new instance (to attach its root
    volume) and that volume (to tag it) by scanning the whole region, which makes seeding N
    instances cost N^2. The instance being made is the last one of the newest reservation and
    volumes are keyed by id, so both are found directly; anything else goes to moto's own
    lookups. The shortcuts live on this backend object for the duration of the call only."""
    get_instance, describe_volumes = backend.get_instance, backend.describe_volumes

    def newest_instance(instance_id: str) -> Any:
        if backend.reservations:
            newest = next(reversed(backend.reservations.values()))
            if newest.instances and newest.instances[-1].id == instance_id:
                return newest.instances[-1]
        return get_instance(instance_id)

    def volumes_by_id(volume_ids: list[str] | None = None, filters: Any = None) -> list[Any]:
        if volume_ids and not filters and all(v in backend.volumes for v in volume_ids):
            return [backend.volumes[v] for v in volume_ids]
        return describe_volumes(volume_ids, filters)

    backend.get_instance, backend.describe_volumes = newest_instance, volumes_by_id
    try:
        yield
    finally:
        del backend.get_instance, backend.describe_volumes


def set_state(inst: Any, name: str) -> None:
    inst._state.name = name
    inst._state.code = MOTO_STATES[name][0]


def set_reason(inst: Any, code: str, message: str) -> None:
    from moto.ec2.models.instances import StateReason

    inst.state_reason = StateReason(f"{code}: {message}", code)
    inst._reason = f"{code}: {message}"


def launched_user_data(inst: Any) -> bytes | None:
    """The instance's user data as launched (moto keeps botocore's base64)."""
    encoded = getattr(inst, "user_data", None)
    if not encoded:
        return None
    raw = encoded.as_bytes() if hasattr(encoded, "as_bytes") else str(encoded).encode()
    return base64.b64decode(raw)


def instance_tags(inst: Any) -> dict[str, str]:
    return dict(inst.ec2_backend.tags.get(inst.id, {}))


def moto_environ(region: str, account_id: str) -> dict[str, Any]:
    """A request's WSGI environ as moto routes it (EC2 of that region and account), for what
    the sim asks of moto on its own (`_call_moto` fills in the body)."""
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "HTTP_HOST": f"ec2.{region}.amazonaws.com",
        "HTTP_AUTHORIZATION": (
            f"AWS4-HMAC-SHA256 Credential=sim/20260101/{region}/ec2/aws4_request, "
            "SignedHeaders=host, Signature=sim"
        ),
        "HTTP_X_MOTO_ACCOUNT_ID": account_id,
    }
