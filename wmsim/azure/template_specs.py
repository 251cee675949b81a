"""Template specs (Microsoft.Resources/templateSpecs and their versions) in the simulated ARM:
PUT and GET (a version's body holds `mainTemplate`); the parent spec must exist, and the
spec's group. Deployments name a version by templateLink.id.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from werkzeug.wrappers import Response

from wmsim.azure.arm_host import ArmHost
from wmsim.azure.errors import ArmError, not_found, required_location
from wmsim.azure.resource_groups import DEFAULT_GROUP_LOCATION, ResourceGroups
from wmsim.azure.resources import _json, _key, _now_iso, as_object, canonical_location

TEMPLATE_SPEC_TYPE = "Microsoft.Resources/templateSpecs"
TEMPLATE_SPEC_VERSION_TYPE = "Microsoft.Resources/templateSpecs/versions"

Handler = Callable[[], Response]


class TemplateSpecs:
    """The template specs of one SimArm (its lock held by the caller)."""

    def __init__(self, arm: ArmHost, groups: ResourceGroups) -> None:
        self._arm = arm
        self._groups = groups
        self._specs: dict[str, dict[str, Any]] = {}  # lower-case id -> model
        self._versions: dict[str, dict[str, Any]] = {}  # lower-case id -> model

    def reset(self) -> None:
        self._specs.clear()
        self._versions.clear()

    def main_template(self, version_id: str) -> dict[str, Any] | None:
        """A copy of the template a version holds; None when there is no such version."""
        version = self._versions.get(_key(version_id.rstrip("/")))
        return None if version is None else copy.deepcopy(version["properties"]["mainTemplate"])

    def put(
        self,
        version_id: str,
        main_template: Mapping[str, Any],
        location: str = DEFAULT_GROUP_LOCATION,
    ) -> None:
        """Hold a template spec version (its group and spec made as needed), as if created by
        the SDK."""
        parts = version_id.strip("/").split("/")
        if len(parts) != 10 or [p.lower() for p in parts[6:9:2]] != ["templatespecs", "versions"]:
            raise ValueError(f"not a template spec version id: {version_id!r}")
        sub, group, spec, version = parts[1], parts[3], parts[7], parts[9]
        spec_id = (
            f"/subscriptions/{sub}/resourceGroups/{group}/providers/{TEMPLATE_SPEC_TYPE}/{spec}"
        )
        if self._groups.find(sub, group) is None:
            self._groups.create(sub, group, location)
        held = self._specs.setdefault(
            _key(spec_id), _spec_model(spec_id, canonical_location(location), {}, {})
        )
        version_model = _version_model(
            f"{spec_id}/versions/{version}",
            canonical_location(location),
            {},
            {"mainTemplate": copy.deepcopy(dict(main_template))},
        )
        self._versions[_key(version_model["id"])] = version_model
        held["properties"]["versions"][version] = _version_times()

    def route(
        self, method: str, sub: str, group: str, tail: list[str], low: list[str]
    ) -> tuple[str, Handler] | None:
        spec_id = (
            f"/subscriptions/{sub}/resourceGroups/{group}/providers/{TEMPLATE_SPEC_TYPE}/{tail[0]}"
        )
        if len(tail) == 1:
            handlers = {
                "PUT": ("TemplateSpecs_CreateOrUpdate", lambda: self._put_spec(spec_id)),
                "GET": ("TemplateSpecs_Get", lambda: _json(self._spec_or_404(spec_id))),
            }
            return handlers.get(method)
        if low[1] != "versions" or len(tail) > 3:
            return None
        if len(tail) == 2:
            if method == "GET":
                return "TemplateSpecVersions_List", lambda: self._list_versions(spec_id)
            return None
        version_id = f"{spec_id}/versions/{tail[2]}"
        handlers = {
            "PUT": ("TemplateSpecVersions_CreateOrUpdate", lambda: self._put_version(version_id)),
            "GET": ("TemplateSpecVersions_Get", lambda: _json(self._version_or_404(version_id))),
        }
        return handlers.get(method)

    def _put_spec(self, spec_id: str) -> Response:
        parts = spec_id.split("/")
        self._groups.get(parts[2], parts[4])
        body = self._arm._body()
        location = required_location(body)
        existing = self._specs.get(_key(spec_id))
        props = dict(as_object(body.get("properties")))
        props["versions"] = (existing or {}).get("properties", {}).get("versions", {})
        model = _spec_model(spec_id, location, dict(body.get("tags") or {}), props)
        self._specs[_key(spec_id)] = model
        return _json(model, 200 if existing else 201)

    def _spec_or_404(self, spec_id: str) -> dict[str, Any]:
        return _held_or_404(self._specs, spec_id)

    def _put_version(self, version_id: str) -> Response:
        spec_id = version_id.rsplit("/versions/", 1)[0]
        spec = self._specs.get(_key(spec_id))
        if spec is None:
            raise ArmError(
                404,
                "ParentResourceNotFound",
                "Can not perform requested operation on nested resource. Parent resource "
                f"'{spec_id.rsplit('/', 1)[1]}' not found.",
            )
        body = self._arm._body()
        props = as_object(body.get("properties"))
        if not isinstance(props.get("mainTemplate"), dict):
            raise ArmError(
                400,
                "InvalidRequestContent",
                "The request content was invalid and could not be deserialized: 'Required "
                "property 'mainTemplate' not found in JSON. Path 'properties'.'",
            )
        existing = self._versions.get(_key(version_id))
        model = _version_model(
            version_id,
            canonical_location(str(body.get("location") or "")) or spec["location"],
            dict(body.get("tags") or {}),
            copy.deepcopy(props),
        )
        self._versions[_key(version_id)] = model
        spec["properties"]["versions"][model["name"]] = _version_times()
        return _json(model, 200 if existing else 201)

    def _version_or_404(self, version_id: str) -> dict[str, Any]:
        return _held_or_404(self._versions, version_id)

    def _list_versions(self, spec_id: str) -> Response:
        self._spec_or_404(spec_id)
        prefix = _key(spec_id) + "/versions/"
        return _json({"value": [m for k, m in self._versions.items() if k.startswith(prefix)]})


def _held_or_404(models: dict[str, dict[str, Any]], rid: str) -> dict[str, Any]:
    model = models.get(_key(rid))
    if model is None:
        raise not_found(rid)
    return model


def _spec_model(
    spec_id: str, location: str, tags: dict[str, str], props: dict[str, Any]
) -> dict[str, Any]:
    props.setdefault("versions", {})
    return _model(spec_id, TEMPLATE_SPEC_TYPE, location, tags, props)


def _version_model(
    version_id: str, location: str, tags: dict[str, str], props: dict[str, Any]
) -> dict[str, Any]:
    return _model(version_id, TEMPLATE_SPEC_VERSION_TYPE, location, tags, props)


def _model(
    rid: str, rtype: str, location: str, tags: dict[str, str], props: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": rid,
        "name": rid.rsplit("/", 1)[1],
        "type": rtype,
        "location": location,
        "tags": tags,
        "properties": props,
    }


def _version_times() -> dict[str, str]:
    now = _now_iso()
    return {"timeCreated": now, "timeModified": now}
