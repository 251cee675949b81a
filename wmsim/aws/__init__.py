"""The simulated AWS: EC2's API (`ec2`), each VM's instance metadata service (`imds`).

`CLOUD` is what the rest of wmsim uses of it (wmsim/cloud.py); the simulator itself is
imported only when started, so reading the table stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wm.pools.config_tables import SPOT_EC2
from wmsim.aws.bootdata import Ec2Metadata
from wmsim.bootdata import CloudMetadata
from wmsim.cloud import SimCloud, imported_when_called


def _provider_settings(endpoint: str, cert_path: str | None, trust: str | None) -> dict[str, Any]:
    return {"endpoint": endpoint, "credentials": "simulated", "identity_certificate": trust}


def _metadata_reader(base_url: str, ca_bundle: str | None) -> CloudMetadata:
    return Ec2Metadata(base_url)


def _on_spot(launch_config: Mapping[str, Any]) -> dict[str, Any]:
    lc = dict(launch_config)
    lc["launchConfig"] = {**lc.get("launchConfig", {}), "InstanceMarketOptions": SPOT_EC2}
    return lc


CLOUD = SimCloud(
    kind="aws",
    serve=imported_when_called("wmsim.aws.ec2:serve"),
    provider_settings=_provider_settings,
    metadata_reader=_metadata_reader,
    on_spot=_on_spot,
    colour="#ff9900",
    demo_share=0.84,
    legacy_launch=imported_when_called("wmsim.aws.legacy:launch"),
    legacy_terminate=imported_when_called("wmsim.aws.legacy:terminate"),
)
