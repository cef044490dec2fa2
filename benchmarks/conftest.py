"""Benchmarks run with pytest-benchmark: ``pytest benchmarks --benchmark-only``.

Each file times kinema side by side with a baseline in the same run; none of
them asserts a time.
"""
