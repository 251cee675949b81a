"""What the gcp kind does, on Google Compute Engine: `make` builds the provider
(provider.py), `make_verifier` the verifier of its workers' identity tokens (identity.py).
google-cloud-compute is imported when a provider builds its clients, never on import: a
process for another cloud never loads it."""

from wm.providers.gcp.identity import make_verifier
from wm.providers.gcp.provider import make

__all__ = ["make", "make_verifier"]
