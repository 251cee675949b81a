"""What the azure kind does: `make` builds the provider (provider.py: VMs in the resource
form, one PUT each, and what the provider composes: clients.py its SDK clients, errors.py its
errors' categories, vm_body.py and vm_put.py a VM's PUT, listing.py and states.py what ARM's
lists say (the take-over of worker-manager's VMs is wm/take_over/adoption/azure.py, which the
provider holds as `adoption` with adopt_legacy); arm.py and deployments.py:
launch configs in the ARM-template form, one deployment each, its rules and its calls;
names.py: the names both forms give a worker's resources), `make_verifier` the verifier of its
workers' attested data (identity.py).
Imports point one way: identity -> provider (and clients) -> the rest; below the provider,
states -> arm and listing, deployments -> arm and names, vm_put -> listing, vm_body
-> names. The SDK is imported when a provider builds its clients, never on import: a process
for another cloud never loads it."""

from wm.providers.azure.identity import make_verifier
from wm.providers.azure.provider import make

__all__ = ["make", "make_verifier"]
