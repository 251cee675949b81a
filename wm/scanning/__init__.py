"""Scanning: keeping the database true to each cloud, one (provider, region) at a time.

scanner.py is the Scanner service and one scan; scan_diff.py decides, purely, what the cloud's
list changes in the rows.
"""
