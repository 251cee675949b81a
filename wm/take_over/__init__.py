"""Taking over a live Taskcluster worker-manager: "legacy" here, and only here, means that one.

marks.py names and marks what wm imports; `wm import` is cli.py (the command), import_plan.py
(its plan, pure), legacy_client.py (the legacy's API read) and importer.py (the one
transaction); during a take-over the web process answers one rootUrl for both sides: routes.py
decides which side answers (pure), forwarding.py forwards what is not wm's, legacy_forwarder.py
is its HTTP client and merged.py pages the lists of both. So the two clients of the one remote
sit here side by side: the import's synchronous reader through the `taskcluster` client
(legacy_client.LegacyClient) and the web process's async forwarder on httpx
(legacy_forwarder.LegacyForwarder). While the scans adopt the legacy's VMs: adoption/ (a
provider kind's adopter, held by its provider with adopt_legacy), adoption_report.py (what the
scans and `wm status` say of it), registration.py and imported_reregistration.py (what an
imported worker may at registration); its rows are wm/db/imported_workers.py.

Removable: tests/unit/test_take_over_hooks.py lists every place outside this folder that
reaches it; delete the folder, wm/db/imported_workers.py and those hooks.
"""
