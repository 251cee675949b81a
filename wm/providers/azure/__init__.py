"""What the azure kind does: `make` builds the provider (provider.py: VMs in the resource
form, one PUT each; arm.py and deployments.py: launch configs in the ARM-template form, one
deployment each, its rules and its calls; names.py: the names both forms give a worker's
resources), `make_verifier` the verifier of its workers' attested data (identity.py).
Imports point one way: identity -> provider -> deployments -> arm (names below them). The SDK is
imported when a provider builds its clients, never on import: a process for another cloud
never loads it."""

from wm.providers.azure.identity import make_verifier
from wm.providers.azure.provider import make

__all__ = ["make", "make_verifier"]
