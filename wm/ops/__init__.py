"""What operators watch: logs, metrics and error reports.

telemetry.py writes the JSON log lines and keeps the Prometheus metrics; metrics_ports.py is
each process type's default metrics port; sentry.py sends ERROR lines as Sentry events,
error_reports.py decides their tags and fingerprints (pure), repeats.py how often one failure
is reported (pure).
"""
