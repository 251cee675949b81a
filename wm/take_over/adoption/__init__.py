"""Adoption: a provider's take-over of the VMs a legacy worker-manager launched for it.

base.py is the interface a kind implements (`Adoption`) and what every kind shares; aws.py,
gcp.py and azure.py are the kinds' adopters, each reading worker-manager's own tags through its
provider's gated calls. A provider with `adopt_legacy = true` holds one (`provider.adoption`,
set by wm.providers.build_provider); the others hold None and never load this package.
"""

from __future__ import annotations

import importlib
from typing import Any

from wm.kinds import describe
from wm.take_over.adoption.base import Adoption


def adopter(kind: str, provider: Any) -> Adoption:
    """The adopter of one provider of a kind, reading through that provider's calls; a kind
    without one (static: wm launches nothing there) cannot take over (config refuses it)."""
    module = importlib.import_module(f"{__name__}.{describe(kind).name}")
    adoption: Adoption = module.adopt(provider)
    return adoption
