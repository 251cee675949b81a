"""Configuration: config.toml and the environment, read once into frozen typed objects.

loader.py is the one reader (the `Config` objects, every problem of a file at once, the
environment's secrets); base.py holds what the config and the provider kinds (wm/kinds/) both
build on; provider_ids.py is how a providerId is written where a cloud allows less. This file
imports nothing: the kinds import base.py, and the loader imports the kinds, so a loader here
would make importing `wm.kinds` first a cycle.
"""
