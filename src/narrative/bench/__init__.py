"""Benchmarks that run through the engine (LoCoMo retrieval, latency); scripts in bench/ call these."""
