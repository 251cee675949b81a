"""How worker-runner learns who it is on EC2, from the VM's metadata service (see
wmsim/bootdata.py).

EC2: IMDSv2 token, then `user-data` (JSON rootUrl, workerPoolId, providerId, workerGroup),
the identity document (workerId = its instanceId) and its signature, `public-hostname` and
`public-ipv4`; termination: `meta-data/spot/termination-time` exists.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from wmsim.bootdata import BootData, MetadataError, MetadataHttp, complete, json_object

EC2_TOKEN_TTL_S = 21600


@dataclass
class Ec2Metadata:
    base_url: str  # the VM's metadata base URL (IMDS's http://169.254.169.254)
    _token: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self) -> BootData:
        user_data = json_object(self.query("/user-data"), "/user-data")
        proof = self.identity_proof("")
        identity = json_object(proof["document"], "/dynamic/instance-identity/document")
        return complete(
            "/user-data",
            BootData(
                root_url=str(user_data.get("rootUrl", "")),
                provider_id=str(user_data.get("providerId", "")),
                worker_pool_id=str(user_data.get("workerPoolId", "")),
                worker_group=str(user_data.get("workerGroup", "")),
                worker_id=str(identity.get("instanceId", "")),
                proof=proof,
                provider_metadata={
                    "instance-id": str(identity.get("instanceId", "")),
                    "region": str(identity.get("region", "")),
                    "availability-zone": str(identity.get("availabilityZone", "")),
                    "local-ipv4": str(identity.get("privateIp", "")),
                    "public-hostname": self.query("/meta-data/public-hostname"),
                    "public-ipv4": self.query("/meta-data/public-ipv4"),
                },
            ),
        )

    def identity_proof(self, audience: str) -> dict[str, str]:
        return {
            "document": self.query("/dynamic/instance-identity/document"),
            "signature": self.query("/dynamic/instance-identity/signature"),
        }

    def terminating(self) -> bool:
        try:
            self.query("/meta-data/spot/termination-time")
        except MetadataError:
            return False
        return True

    def query(self, path: str) -> str:
        """GET <base>/latest<path> with a (cached) IMDSv2 session token; a token refused (it
        expired) is replaced once."""
        try:
            return self._get(path)
        except MetadataError as error:
            if error.status != 401:
                raise
            with self._lock:
                self._token = None
            return self._get(path)

    def _get(self, path: str) -> str:
        http = MetadataHttp(self.base_url)
        with self._lock:
            if self._token is None:
                ttl = {"X-aws-ec2-metadata-token-ttl-seconds": str(EC2_TOKEN_TTL_S)}
                self._token = http.get("/latest/api/token", ttl, method="PUT")
            token = self._token
        return http.get("/latest" + path, {"X-aws-ec2-metadata-token": token})
