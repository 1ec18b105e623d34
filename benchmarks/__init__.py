"""Benchmarks of gpumcmc against its peers: ``python -m benchmarks <suite>``."""
