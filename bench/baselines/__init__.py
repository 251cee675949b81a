"""Baselines the benchmarks compare wm with: small, documented reproductions of older designs."""
