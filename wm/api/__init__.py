"""The worker API: registration with identity proofs, re-registration, removal, operator views."""
