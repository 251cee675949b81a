"""EC2's instance metadata service (IMDSv2), as one simulated instance sees it.

The rules IMDS has and worker-runner relies on (tools/worker-runner/provider/aws/metadata.go):
- `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds: 1..21600` answers a
  session token; without a valid TTL header it is a 400, any other method on it a 405.
- Every other request must carry a live token of this instance in `X-aws-ec2-metadata-token`
  (IMDSv2 only, as `HttpTokens: required` makes it) or gets a 401.
- `/latest/user-data`: the user data as launched (botocore's base64 decoded), 404 when none;
  `/latest/dynamic/instance-identity/document` and `/signature`: the signed identity document;
  `/latest/meta-data/...`: instance-id, ami-id, ami-launch-index, instance-type, placement/...,
  local-ipv4, local-hostname, public-ipv4 and public-hostname (404 without a public address),
  instance-life-cycle, and spot/termination-time and spot/instance-action only once a spot
  interruption is announced (two minutes before it, as EC2 announces it). Directories list
  their entries, one a line.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from wmsim.metadata import MetaAnswer, not_found, text, tree_answer

TOKEN_TTL_MAX_S = 21600
TOKEN_PATH = "/latest/api/token"
TTL_HEADER = "x-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "x-aws-ec2-metadata-token"
SPOT_NOTICE_S = 120.0  # EC2 announces a spot interruption two minutes ahead


@dataclass(frozen=True)
class Ec2VmView:
    """What the instance's metadata service knows about it."""

    instance_id: str
    region: str
    availability_zone: str
    image_id: str
    instance_type: str
    launch_index: int  # its place in its RunInstances call (ami-launch-index)
    private_ip: str
    private_hostname: str
    public_ip: str | None
    public_hostname: str | None
    spot: bool
    user_data: bytes | None  # as launched, decoded
    document: str  # the identity document's text, exactly as signed
    signature: str  # its base64 RSA-SHA256 signature
    interruption_at: datetime | None  # an announced spot interruption (UTC), else None


class Ec2Tokens:
    """Session tokens, each bound to the instance that asked for it."""

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[str, float]] = {}  # token -> (instance id, expiry)
        self._lock = threading.Lock()

    def issue(self, instance_id: str, ttl_s: int) -> str:
        now = time.monotonic()
        token = secrets.token_urlsafe(40)
        with self._lock:
            for old in [t for t, (_, expiry) in self._tokens.items() if expiry <= now]:
                del self._tokens[old]
            self._tokens[token] = (instance_id, now + ttl_s)
        return token

    def valid(self, token: str | None, instance_id: str) -> bool:
        with self._lock:
            held = self._tokens.get(token or "")
        return held is not None and held[0] == instance_id and held[1] > time.monotonic()


def answer(
    view: Ec2VmView, tokens: Ec2Tokens, method: str, path: str, headers: Mapping[str, str]
) -> MetaAnswer:
    """IMDS's answer to one request of this instance (path below the VM's prefix)."""
    if path.rstrip("/") == TOKEN_PATH:
        if method != "PUT":
            return text("Method Not Allowed", 405)
        ttl = headers.get(TTL_HEADER, "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= TOKEN_TTL_MAX_S:
            return text("Bad Request", 400)
        token = tokens.issue(view.instance_id, int(ttl))
        return text(token, 200, (TTL_HEADER, ttl))
    if method != "GET":
        return text("Method Not Allowed", 405)
    if not tokens.valid(headers.get(TOKEN_HEADER), view.instance_id):
        return text("Unauthorized", 401)
    if path == "/latest/user-data":
        if view.user_data is None:
            return not_found()
        return MetaAnswer(200, view.user_data, "application/octet-stream")
    for root, tree in (
        ("/latest/meta-data", meta_data(view)),
        ("/latest/dynamic", dynamic(view)),
    ):
        if path == root or path.startswith(root + "/"):
            return tree_answer(tree, path[len(root) :]) or not_found()
    if path.strip("/") == "latest":
        return text("dynamic\nmeta-data\nuser-data")
    return not_found()


def meta_data(view: Ec2VmView) -> dict[str, str]:
    tree = {
        "ami-id": view.image_id,
        "ami-launch-index": str(view.launch_index),
        "hostname": view.private_hostname,
        "instance-id": view.instance_id,
        "instance-life-cycle": "spot" if view.spot else "on-demand",
        "instance-type": view.instance_type,
        "local-hostname": view.private_hostname,
        "local-ipv4": view.private_ip,
        "placement/availability-zone": view.availability_zone,
        "placement/region": view.region,
    }
    if view.public_ip:
        tree["public-ipv4"] = view.public_ip
    if view.public_hostname:
        tree["public-hostname"] = view.public_hostname
    if view.interruption_at is not None:
        when = view.interruption_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        tree["spot/termination-time"] = when
        tree["spot/instance-action"] = json.dumps({"action": "terminate", "time": when})
    return tree


def dynamic(view: Ec2VmView) -> dict[str, str]:
    return {
        "instance-identity/document": view.document,
        "instance-identity/signature": view.signature,
    }
