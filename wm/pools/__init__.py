"""Taskcluster worker pool definitions: reading them, checking them, applying them.

definition.py parses and checks a definition as worker-manager's schemas do (schemas.py the
schemas as data, json_check.py the checker, files.py the JSON and YAML files); apply_plan.py
plans what applying definitions changes (pure); changes.py is the one use case that applies
them in one transaction (the API's pool endpoints and `wm pools apply`); config_tables.py turns
the old `[[pools]]` tables of config.toml into definitions (`wm pools convert`).
"""
