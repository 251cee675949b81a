"""Taking over a live Taskcluster worker-manager: "legacy" here, and only here, means that one.

marks.py names and marks what wm imports; `wm import` is cli.py (the command), import_plan.py
(its plan, pure), legacy_client.py (the legacy's API read) and importer.py (the one
transaction); during a take-over the web process answers one rootUrl for both sides: routes.py
decides which side answers (pure), forwarding.py forwards what is not wm's, legacy_forwarder.py
is its HTTP client and merged.py pages the lists of both. So the two clients of the one remote
sit here side by side: the import's synchronous reader through the `taskcluster` client
(legacy_client.LegacyClient) and the web process's async forwarder on httpx
(legacy_forwarder.LegacyForwarder).
"""
