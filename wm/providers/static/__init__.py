"""What the static kind does: nothing in a cloud. Its workers are made by createWorker and
stopped in the database; the one part a process needs is `make_verifier`, which checks the
secret a registering worker shows against the hash createWorker stored (identity.py). It has
no `make`: its kind is not scanned (its description's `scanned`), so no process builds a
provider for it."""

from wm.providers.static.identity import make_verifier

__all__ = ["make_verifier"]
