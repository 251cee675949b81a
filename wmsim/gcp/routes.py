"""The URL map of the simulated GCE: each REST path and method to its operation name
(`instances.insert`, `zoneOperations.wait` ...), and the /_sim/ control endpoints."""

from __future__ import annotations

from werkzeug.routing import Rule

from wmsim.gcp.rest import API


def rules() -> list[Rule]:
    zone = f"{API}/projects/<project>/zones/<zone>"
    region = f"{API}/projects/<project>/regions/<region>"
    glob = f"{API}/projects/<project>/global"
    return [
        Rule(f"{zone}/instances", methods=["GET"], endpoint="instances.list"),
        Rule(f"{zone}/instances", methods=["POST"], endpoint="instances.insert"),
        Rule(f"{zone}/instances/<name>", methods=["GET"], endpoint="instances.get"),
        Rule(f"{zone}/instances/<name>", methods=["DELETE"], endpoint="instances.delete"),
        Rule(f"{zone}/operations", methods=["GET"], endpoint="zoneOperations.list"),
        Rule(f"{zone}/operations/<operation>", methods=["GET"], endpoint="zoneOperations.get"),
        Rule(
            f"{zone}/operations/<operation>/wait", methods=["POST"], endpoint="zoneOperations.wait"
        ),
        Rule(f"{glob}/networks", methods=["POST"], endpoint="networks.insert"),
        Rule(f"{glob}/networks/<name>", methods=["GET"], endpoint="networks.get"),
        Rule(f"{region}/subnetworks", methods=["POST"], endpoint="subnetworks.insert"),
        Rule(f"{region}/subnetworks/<name>", methods=["GET"], endpoint="subnetworks.get"),
        Rule(f"{glob}/images", methods=["POST"], endpoint="images.insert"),
        Rule(f"{glob}/images/<name>", methods=["GET"], endpoint="images.get"),
        Rule(f"{glob}/images/family/<family>", methods=["GET"], endpoint="images.getFromFamily"),
        Rule(
            f"{API}/projects/<project>/aggregated/instances",
            methods=["GET"],
            endpoint="instances.aggregatedList",
        ),
        # Signals: the Billing Catalog (its own host on GCP) and capacity advice.
        Rule("/v1/services/<service>/skus", methods=["GET"], endpoint="skus.list"),
        Rule(f"{region}/advice/capacity", methods=["POST"], endpoint="advice.capacity"),
        Rule("/_sim/requests", methods=["GET"], endpoint="sim.requests"),
        Rule("/_sim/signal-fates", methods=["POST"], endpoint="sim.signal-fates"),
        Rule("/_sim/requests/reset", methods=["POST"], endpoint="sim.requests.reset"),
        Rule("/_sim/behaviour", methods=["POST"], endpoint="sim.behaviour"),
        Rule("/_sim/instances", methods=["GET"], endpoint="sim.instances"),
        Rule("/_sim/kill", methods=["POST"], endpoint="sim.kill"),
        Rule("/_sim/remove", methods=["POST"], endpoint="sim.remove"),
        Rule("/_sim/reset", methods=["POST"], endpoint="sim.reset"),
        Rule("/_sim/creates", methods=["GET"], endpoint="sim.creates"),
        Rule("/_sim/networks", methods=["POST"], endpoint="sim.networks"),
        Rule("/_sim/subnetworks", methods=["POST"], endpoint="sim.subnetworks"),
        Rule("/_sim/images", methods=["POST"], endpoint="sim.images"),
        Rule("/_sim/identity/<zone>/<name>", methods=["GET"], endpoint="sim.identity"),
        Rule("/_sim/jwks", methods=["GET"], endpoint="sim.jwks"),
    ]
