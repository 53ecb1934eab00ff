"""Benchmarks that put numbers on the tuner's claims: overhead, measurement fidelity, search efficiency, speedup.

Run them with `python benchmarks/run.py [--quick]`; see benchmarks/README.md.
"""
