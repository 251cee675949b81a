"""The routes of what an instance refers to (networks, subnetworks, images: insert, get,
getFromFamily), over the catalogue (wmsim/gcp/catalog.py); made at once, as GCE's own."""

from __future__ import annotations

import threading
from typing import Any

from werkzeug.wrappers import Request, Response

from wmsim.gcp.catalog import Image
from wmsim.gcp.errors import invalid, not_found
from wmsim.gcp.rest import base_url, json_body, json_response, resource_id


def image_json(request: Request, image: Image) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "compute#image",
        "id": resource_id(image.path),
        "name": image.name,
        "status": "READY",
        "diskSizeGb": "10",
        "selfLink": f"{base_url(request)}/{image.path}",
    }
    if image.family:
        out["family"] = image.family
    return out


class CatalogRoutes:
    """SimGce's networks, subnetworks and images routes (state on SimGce, wmsim/gcp/gce.py)."""

    _lock: threading.RLock

    def _network_insert(self, request: Request, project: str) -> Response:
        body = json_body(request)
        with self._lock:
            network = self._state.catalog.add_network(
                project,
                body.get("name", ""),
                auto_subnetworks=bool(body.get("autoCreateSubnetworks")),
            )
        return json_response(self._done_op(request, project, "global", network.path))

    def _network_get(self, request: Request, project: str, name: str) -> Response:
        with self._lock:
            network = self._state.catalog.network(project, name)
            subnetworks = [
                sub.path
                for sub in self._state.catalog.subnetworks.values()
                if network is not None and sub.network == network.path
            ]
        if network is None:
            raise not_found(f"projects/{project}/global/networks/{name}")
        base = base_url(request)
        return json_response(
            {
                "kind": "compute#network",
                "id": resource_id(network.path),
                "name": network.name,
                "selfLink": f"{base}/{network.path}",
                "autoCreateSubnetworks": network.auto_subnetworks,
                "subnetworks": [f"{base}/{path}" for path in subnetworks],
                "routingConfig": {"routingMode": "REGIONAL"},
            }
        )

    def _subnetwork_insert(self, request: Request, project: str, region: str) -> Response:
        body = json_body(request)
        if body.get("network") is None:
            raise invalid("resource.network", "", "Required field 'resource.network' not specified")
        with self._lock:
            subnetwork = self._state.catalog.add_subnetwork(
                project,
                region,
                body.get("name", ""),
                body["network"],
                str(body.get("ipCidrRange") or "10.128.0.0/20"),
            )
        return json_response(self._done_op(request, project, f"regions/{region}", subnetwork.path))

    def _subnetwork_get(self, request: Request, project: str, region: str, name: str) -> Response:
        with self._lock:
            subnetwork = self._state.catalog.subnetwork(project, region, name)
        if subnetwork is None:
            raise not_found(f"projects/{project}/regions/{region}/subnetworks/{name}")
        base = base_url(request)
        return json_response(
            {
                "kind": "compute#subnetwork",
                "id": resource_id(subnetwork.path),
                "name": subnetwork.name,
                "network": f"{base}/{subnetwork.network}",
                "ipCidrRange": subnetwork.ip_cidr_range,
                "region": f"{base}/projects/{project}/regions/{region}",
                "selfLink": f"{base}/{subnetwork.path}",
            }
        )

    def _image_insert(self, request: Request, project: str) -> Response:
        body = json_body(request)
        with self._lock:
            image = self._state.catalog.add_image(project, body.get("name", ""), body.get("family"))
        return json_response(self._done_op(request, project, "global", image.path))

    def _image_get(self, request: Request, project: str, name: str) -> Response:
        with self._lock:
            image = self._state.catalog.image(project, name)
        if image is None:
            raise not_found(f"projects/{project}/global/images/{name}")
        return json_response(image_json(request, image))

    def _image_get_from_family(self, request: Request, project: str, family: str) -> Response:
        with self._lock:
            image = self._state.catalog.image(project, family, family=True)
        if image is None:
            raise not_found(f"projects/{project}/global/images/family/{family}")
        return json_response(image_json(request, image))
