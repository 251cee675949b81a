"""GCE's metadata server (computeMetadata/v1), as one simulated instance sees it.

The rules the metadata server has and worker-runner relies on
(tools/worker-runner/provider/google/{google,metadata}.go):
- every request carries `Metadata-Flavor: Google` (else 403) and every answer carries it back;
- `instance/attributes/<key>`: the instance's metadata items as created (worker-manager's
  `taskcluster` item among them), 404 for a key it does not have;
- `instance/id` (numeric), `instance/name`, `instance/zone` and `instance/machine-type` (as
  `projects/<number>/...` paths), `instance/image`, `instance/hostname`,
  `instance/network-interfaces/0/ip`, `.../access-configs/0/external-ip` (404 without an
  access config), `project/project-id`, `project/numeric-project-id`;
- `instance/service-accounts/default/identity?audience=...&format=full`: an identity token of
  the instance's service account; 400 without an audience, 404 when the instance was created
  without a service account (it then has no identity to prove);
- `instance/preempted`: `TRUE` from GCE's 30-second pre-emption notice on, else `FALSE`;
  `?wait_for_change=true` is handled by the sim (it waits for the value to change);
- `?recursive=true` on a directory answers its subtree as JSON; a directory without it lists its
  entries, one a line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wmsim.metadata import MetaAnswer, json_answer, not_found, text, tree_answer

ROOT = "/computeMetadata/v1"
FLAVOR = ("Metadata-Flavor", "Google")
PREEMPT_NOTICE_S = 30.0  # GCE gives a pre-empted VM 30 seconds


@dataclass(frozen=True)
class GceVmView:
    """What the instance's metadata server knows about it."""

    instance_id: str  # the numeric id, decimal
    name: str
    project: str
    project_number: int
    zone: str
    machine_type: str
    image: str  # projects/<p>/global/images/<name>
    network_ip: str
    external_ip: str | None  # of the first access config, if it has one
    attributes: Mapping[str, str]  # metadata items as created
    service_account: str | None  # the email of its service account, if it has one
    scopes: tuple[str, ...]
    preempted: bool  # the pre-emption notice is on
    # audience -> identity token (format=full) of the instance's service account
    identity: Callable[[str], str] = field(repr=False, default=lambda audience: "")


def answer(
    view: GceVmView, method: str, path: str, args: Mapping[str, str], headers: Mapping[str, str]
) -> MetaAnswer:
    """The metadata server's answer to one request of this instance (path below its prefix)."""
    if headers.get("metadata-flavor") != "Google":
        return text("Missing Metadata-Flavor:Google header.", 403, FLAVOR)
    if method != "GET":
        return text("Method Not Allowed", 405, FLAVOR)
    if not (path == ROOT or path.startswith(ROOT + "/")):
        return not_found(FLAVOR)
    inner = path[len(ROOT) :].strip("/")
    accounts = "instance/service-accounts/"
    if inner.startswith(accounts) and inner.endswith("/identity"):
        account = inner[len(accounts) : -len("/identity")]
        if view.service_account is None or account not in ("default", view.service_account):
            return not_found(FLAVOR)
        audience = args.get("audience", "")
        if not audience:
            return text("non-empty audience parameter required", 400, FLAVOR)
        return text(view.identity(audience), 200, FLAVOR)
    tree = metadata_tree(view)
    if args.get("recursive", "").lower() == "true":
        subtree = _nested(tree, inner)
        return json_answer(subtree, 200, FLAVOR) if subtree is not None else not_found(FLAVOR)
    found = tree_answer(tree, inner)
    if found is None:
        return not_found(FLAVOR)
    return MetaAnswer(found.status, found.body, "application/text", (FLAVOR,))


def metadata_tree(view: GceVmView) -> dict[str, str]:
    number = view.project_number
    nic = "instance/network-interfaces/0"
    tree = {
        "instance/id": view.instance_id,
        "instance/name": view.name,
        "instance/zone": f"projects/{number}/zones/{view.zone}",
        "instance/machine-type": f"projects/{number}/machineTypes/{view.machine_type}",
        "instance/image": view.image,
        "instance/hostname": f"{view.name}.{view.zone}.c.{view.project}.internal",
        "instance/preempted": "TRUE" if view.preempted else "FALSE",
        f"{nic}/ip": view.network_ip,
        f"{nic}/network": f"projects/{number}/networks/default",
        "project/project-id": view.project,
        "project/numeric-project-id": str(number),
    }
    if view.external_ip:
        tree[f"{nic}/access-configs/0/external-ip"] = view.external_ip
        tree[f"{nic}/access-configs/0/type"] = "ONE_TO_ONE_NAT"
    for key, value in view.attributes.items():
        tree[f"instance/attributes/{key}"] = value
    if view.service_account:
        for account in ("default", view.service_account):
            tree[f"instance/service-accounts/{account}/email"] = view.service_account
            tree[f"instance/service-accounts/{account}/scopes"] = "\n".join(view.scopes)
    return tree


def _nested(tree: Mapping[str, str], prefix: str) -> object | None:
    """The subtree under `prefix` as nested JSON objects (`?recursive=true`): names in
    camelCase (machineType, networkInterfaces), but attribute keys as they were given."""
    if prefix in tree:
        return tree[prefix]
    head = f"{prefix}/" if prefix else ""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if not key.startswith(head):
            continue
        node, parent = out, prefix.rsplit("/", 1)[-1]
        *dirs, leaf = key[len(head) :].split("/")
        for name in dirs:
            node = node.setdefault(_json_name(name, parent), {})
            parent = name
        node[_json_name(leaf, parent)] = value
    return out or None


def _json_name(name: str, parent: str) -> str:
    if parent == "attributes":
        return name
    first, *rest = name.split("-")
    return first + "".join(part.title() for part in rest)


def etag(body: bytes) -> str:
    """What the server sends as ETag: `wait_for_change` waits for another one."""
    return hashlib.sha256(body).hexdigest()[:16]
