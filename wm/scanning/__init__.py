"""Scanning: keeping the database true to each cloud, one (provider, region) at a time.

scanner.py is the Scanner service and one scan, its steps; report.py what a scan did;
listing.py what it keeps of its listing page by page; scan_diff.py decides, purely, what the
cloud's list changes in the rows; scan_errors.py the pool errors a scan files.
"""
