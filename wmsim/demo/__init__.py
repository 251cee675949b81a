"""`wmsim demo`: wm's processes on the simulated clouds, a workload, a live view, a report."""
