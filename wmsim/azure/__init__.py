"""The simulated Azure: ARM's compute and network API (`arm`, made of parts of one job each
that arm_state.py lists), Entra ID's token endpoint (`entra`), its deployments, template specs
and resource groups (`deployments` and the modules it names), the ARM template language
(`arm_templates`, `template_expressions`, `template_functions`, `template_evaluation`), the
records and errors both sides share (`resources`, `errors`), the launch configs it accepts
(`launch_configs`), each VM's IMDS (`imds`), the attested data it signs (`attested`), and the
worker VM template the demo and the tests deploy (`templates/`).

`CLOUD` is what the rest of wmsim uses of it (wmsim/cloud.py); the simulator itself is
imported only when started, so reading the table stays light.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wm.pools.config_tables import SPOT_AZURE
from wmsim.azure.bootdata import AzureMetadata
from wmsim.azure.templates import WORKER_TEMPLATE
from wmsim.bootdata import CloudMetadata
from wmsim.cloud import LegacyLaunch, LegacyVm, RunningSim, SimCloud, SimCloudConfig, SimControl


def _serve(config: SimCloudConfig, state_dir: Path) -> RunningSim:
    from wmsim.azure.arm import serve

    return serve(config, state_dir)


def _provider_settings(endpoint: str, cert_path: str | None, trust: str | None) -> dict[str, Any]:
    return {
        "endpoint": endpoint,
        "credentials": "simulated",
        "ca_bundle": cert_path,
        "authority": endpoint,
        "identity_roots": [trust],
    }


def _metadata_reader(base_url: str, ca_bundle: str | None) -> CloudMetadata:
    return AzureMetadata(base_url, ca_bundle)


def _on_spot(launch_config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(launch_config) | SPOT_AZURE


def _vm_key(cloud_id: str) -> str:
    """The VM's name, last part of its resource id: the workerId worker-runner reports."""
    return cloud_id.rsplit("/", 1)[-1]


def _publish_for(client: SimControl, launch_configs: list[Any]) -> None:
    """What an operator publishes before applying ARM-template pools: the template spec
    version each names (the simulator's worker template) and the image it deploys."""
    template = json.loads(WORKER_TEMPLATE.read_text())
    for lc in launch_configs:
        deployment = lc.get("armDeployment") if isinstance(lc, Mapping) else None
        if not isinstance(deployment, Mapping):
            continue
        spec_id = deployment.get("templateLink", {}).get("id")
        if spec_id:
            client.control("template-specs", {"id": spec_id, "mainTemplate": template})
        image = deployment.get("parameters", {}).get("imageId", {}).get("value")
        if image:
            where = deployment.get("parameters", {}).get("location", {}).get("value")
            client.control("images", {"id": image, "location": where or "eastus"})


def _leftovers(client: SimControl) -> int:
    """NICs, public IPs and disks still held (VMs are counted apart): what a deployment made
    must go with its worker."""
    return len([r for r in client.resources() if "/virtualMachines/" not in r])


def _legacy_launch(launch: LegacyLaunch) -> LegacyVm:
    from wmsim.azure.legacy import launch as made

    return made(launch)


def _legacy_terminate(settings: Mapping[str, Any], vm: LegacyVm) -> None:
    from wmsim.azure.legacy import terminate

    terminate(settings, vm)


CLOUD = SimCloud(
    kind="azure",
    serve=_serve,
    provider_settings=_provider_settings,
    metadata_reader=_metadata_reader,
    on_spot=_on_spot,
    colour="#0078d4",
    demo_share=0.13,
    vm_key=_vm_key,
    publish_for=_publish_for,
    leftovers=_leftovers,
    legacy_launch=_legacy_launch,
    legacy_terminate=_legacy_terminate,
    moves_first=True,
)
