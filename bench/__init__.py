"""Benchmarks that print figures (not timed tests); see bench/README.md."""
