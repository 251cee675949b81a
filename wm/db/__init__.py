"""Storage: every SQL statement wm runs, and only here (a layout test holds that).

The engine and its pool, the tables and their migrations, claims, LISTEN/NOTIFY, and one module
per noun; worker_writes.py, scan_writes.py (the scanner's) and imported_workers.py (the
take-over's, which only it uses) are the writers of worker rows.
"""
