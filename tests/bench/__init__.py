"""Benchmarks of harness overhead: run with `make bench` (`python -m tests.bench`), not pytest."""
