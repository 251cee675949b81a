"""The simulated clouds, by wm's kind name: the one table the rest of wmsim reads to pick a
cloud's simulator (`wmsim serve`, the `[sim]` config, the fleet, the control client, the demo).
A fourth cloud's simulator is its subpackage (describing itself as a wmsim.cloud.SimCloud)
plus one entry here."""

from __future__ import annotations

from wmsim import aws, azure, gcp
from wmsim.cloud import SimCloud

CLOUDS: dict[str, SimCloud] = {
    "aws": aws.CLOUD,
    "gcp": gcp.CLOUD,
    "azure": azure.CLOUD,
}


def sim_cloud(kind: str) -> SimCloud:
    """The simulated cloud of this kind; ValueError naming the kinds there are otherwise."""
    try:
        return CLOUDS[kind]
    except KeyError:
        raise ValueError(
            f"no simulated cloud of kind {kind!r} (there are: {', '.join(CLOUDS)})"
        ) from None
