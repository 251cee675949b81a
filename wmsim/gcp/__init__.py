"""The simulated Google Cloud: Compute Engine's API (`gce`), its catalogue of machine types,
images and networks (`catalog`), each VM's metadata server (`imds`).

`CLOUD` is what the rest of wmsim uses of it (wmsim/cloud.py); the simulator itself is
imported only when started, so reading the table stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wm.config.provider_ids import from_gce_label
from wm.kinds.gcp import GcpProviderConfig
from wm.pools.config_tables import SPOT_GCE
from wmsim.bootdata import CloudMetadata
from wmsim.cloud import SimCloud, imported_when_called
from wmsim.gcp.bootdata import GceMetadata

# The service account the demo's and the tests' GCE workers are created with.
WORKER_SERVICE_ACCOUNT = "wm-worker@wm-demo.iam.gserviceaccount.com"


def _provider_settings(endpoint: str, cert_path: str | None, trust: str | None) -> dict[str, Any]:
    settings = {"endpoint": endpoint, "credentials": "simulated", "identity_jwks": trust}
    return settings | _worker_identity()


def _worker_identity() -> dict[str, Any]:
    """The service account GCE workers are created with, where wm's config has the keys for
    it (the id is what the simulated GCE puts in their identity tokens' `sub`)."""
    from wmsim.gcp.identity import service_account_id

    if "worker_service_account_email" not in GcpProviderConfig.model_fields:
        return {}
    return {
        "worker_service_account_email": WORKER_SERVICE_ACCOUNT,
        "worker_service_account_id": service_account_id(WORKER_SERVICE_ACCOUNT),
    }


def _metadata_reader(base_url: str, ca_bundle: str | None) -> CloudMetadata:
    return GceMetadata(base_url)


def _on_spot(launch_config: Mapping[str, Any]) -> dict[str, Any]:
    lc = dict(launch_config)
    lc["scheduling"] = {**lc.get("scheduling", {}), **SPOT_GCE}
    return lc


CLOUD = SimCloud(
    kind="gcp",
    serve=imported_when_called("wmsim.gcp.gce:serve"),
    provider_settings=_provider_settings,
    metadata_reader=_metadata_reader,
    on_spot=_on_spot,
    colour="#34a853",
    demo_share=0.03,
    provider_tag=from_gce_label,  # labels hold it escaped (wm/config/provider_ids.py)
    legacy_launch=imported_when_called("wmsim.gcp.legacy:launch"),
    legacy_terminate=imported_when_called("wmsim.gcp.legacy:terminate"),
)
