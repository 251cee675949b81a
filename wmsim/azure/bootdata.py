"""How worker-runner learns who it is on Azure, from the VM's metadata service (see
wmsim/bootdata.py).

Azure: `/metadata/instance` (tags worker-pool-id, provider-id, worker-group, root-url in
compute.tagsList; workerId = compute.name) and the attested document's `signature`
(must be pkcs7); termination: any scheduled event but Freeze.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from wmsim.bootdata import BootData, MetadataError, MetadataHttp, json_object

AZURE_API_VERSION = "2025-04-07"
AZURE_EVENTS_API_VERSION = "2020-07-01"  # scheduled events only exist in this older version
AZURE_TAGS = {  # tag -> BootData field
    "worker-pool-id": "worker_pool_id",
    "provider-id": "provider_id",
    "worker-group": "worker_group",
    "root-url": "root_url",
}


@dataclass
class AzureMetadata:
    base_url: str  # the VM's metadata base URL (http://169.254.169.254)
    ca_bundle: str | None = None  # the simulated ARM serves https

    def configure(self) -> BootData:
        instance = json_object(
            self.query("/metadata/instance", AZURE_API_VERSION), "/metadata/instance"
        )
        proof = self.identity_proof("")
        compute = instance.get("compute") or {}
        tags = {t.get("name"): t.get("value") for t in compute.get("tagsList") or []}
        values: dict[str, str] = {}
        for tag, name in AZURE_TAGS.items():
            if not tags.get(tag):
                raise MetadataError("/metadata/instance", 200, f"did not get {tag} from tags")
            values[name] = str(tags[tag])
        return BootData(
            **values,
            worker_id=str(compute.get("name", "")),
            proof=proof,
            provider_metadata={
                "vm-id": str(compute.get("vmId", "")),
                "instance-type": str(compute.get("vmSize", "")),
                "region": str(compute.get("location", "")),
            },
        )

    def identity_proof(self, audience: str) -> dict[str, str]:
        path = "/metadata/attested/document"
        attested = json_object(self.query(path, AZURE_API_VERSION), path)
        if attested.get("encoding") != "pkcs7":
            raise MetadataError(
                path, 200, f"expected attested document with format pkcs7, got {attested}"
            )
        return {"document": str(attested.get("signature", ""))}

    def terminating(self) -> bool:
        try:
            events = json.loads(self.query("/metadata/scheduledevents", AZURE_EVENTS_API_VERSION))
        except (MetadataError, ValueError):
            return False
        return any(e.get("EventType") != "Freeze" for e in events.get("Events") or [])

    def query(self, path: str, api_version: str) -> str:
        http = MetadataHttp(self.base_url, self.ca_bundle)
        return http.get(f"{path}?api-version={api_version}", {"Metadata": "true"})
