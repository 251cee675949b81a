"""Storage: every SQL statement wm runs, and only here (a layout test holds that).

The engine and its pool, the tables and their migrations, claims, LISTEN/NOTIFY, and one module
per noun; worker_writes.py is the one writer of worker rows.
"""
