"""How worker-runner learns who it is on GCE, from the VM's metadata service (see
wmsim/bootdata.py).

GCE: `instance/id` (workerId), attribute `taskcluster` (JSON workerPoolId, providerId,
workerGroup, rootUrl), project, image, machine type, zone, hostname, external and internal
IP, then the identity token for audience rootUrl; termination: `instance/preempted` = TRUE.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from wmsim.bootdata import BootData, MetadataError, MetadataHttp, complete, json_object

GCE_METADATA_PATHS = {  # worker-runner's providerMetadata name -> path; a failure aborts
    "project-id": "/project/project-id",
    "image": "/instance/image",
    "instance-type": "/instance/machine-type",
    "zone": "/instance/zone",
    "public-hostname": "/instance/hostname",
    "public-ipv4": "/instance/network-interfaces/0/access-configs/0/external-ip",
    "local-ipv4": "/instance/network-interfaces/0/ip",
}


@dataclass
class GceMetadata:
    base_url: str  # the VM's metadata base URL (http://metadata.google.internal)

    def configure(self) -> BootData:
        worker_id = self.query("/instance/id")
        user_data = json_object(
            self.query("/instance/attributes/taskcluster"), "/instance/attributes/taskcluster"
        )
        found = {name: self.query(path) for name, path in GCE_METADATA_PATHS.items()}
        zone = found["zone"].rsplit("/", 1)[-1]
        root_url = str(user_data.get("rootUrl", ""))
        proof = self.identity_proof(root_url)
        return complete(
            "/instance/attributes/taskcluster",
            BootData(
                root_url=root_url,
                provider_id=str(user_data.get("providerId", "")),
                worker_pool_id=str(user_data.get("workerPoolId", "")),
                worker_group=str(user_data.get("workerGroup", "")),
                worker_id=worker_id,
                proof=proof,
                provider_metadata={
                    **found,
                    "instance-id": worker_id,
                    "zone": zone,
                    "region": zone[:-2],
                },
            ),
        )

    def identity_proof(self, audience: str) -> dict[str, str]:
        query = urllib.parse.urlencode({"audience": audience, "format": "full"})
        return {"token": self.query(f"/instance/service-accounts/default/identity?{query}")}

    def terminating(self) -> bool:
        try:
            return self.query("/instance/preempted") == "TRUE"
        except MetadataError:
            return False

    def query(self, path: str) -> str:
        return MetadataHttp(self.base_url).get(
            "/computeMetadata/v1" + path, {"Metadata-Flavor": "Google"}
        )
