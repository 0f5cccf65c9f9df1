"""Benchmark tooling: `generate` writes synthetic knowledge bases of any size (CSV folder or `.grist`)."""
