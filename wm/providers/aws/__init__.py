"""What the aws kind does, on EC2: `make` builds the provider (provider.py), `make_verifier`
the verifier of its workers' identity documents (identity.py). boto3 is imported when a
provider builds its clients, never on import: a process for another cloud never loads it."""

from wm.providers.aws.identity import make_verifier
from wm.providers.aws.provider import make

__all__ = ["make", "make_verifier"]
