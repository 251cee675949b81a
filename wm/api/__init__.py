"""Taskcluster's worker-manager API on the web process: registration with identity proofs and
issued credentials, Hawk and scopes on everything else, the reads operators and tools use."""
