"""Taskcluster's wire contract as pure functions: scopes, credentials, Hawk, API errors.

Nothing here does I/O; the web process wires these to requests and the database.
"""
