"""A bench run's results around given sizes, with the config and machine fields the report reads,
for tests of `bench.report` that build the sizes themselves."""

from __future__ import annotations

from typing import Any


def bench_results(sizes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "sizes": sizes,
        "started_at": "now",
        "wall_s": 1.0,
        "config": {"shape": "people", "fast_embedder": "hash-384", "local_sample": 10},
        "machine": {"cpus": 2, "cpu_model": "x", "memory_gb": 1, "load_avg_start": [0, 0, 0]},
    }
