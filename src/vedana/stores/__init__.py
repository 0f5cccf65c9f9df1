"""Adapters to the stores: Postgres (staging, vectors, run log) and the graph engine."""
