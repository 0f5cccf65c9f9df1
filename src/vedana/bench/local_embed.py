"""Child process of the benchmark: embed texts with the local model and report the timings.

It runs apart from the benchmark so torch's memory (hundreds of MB that never go back to the
OS) does not inflate the peaks of the phases measured after it, and so its own peak is exact.

    python -m vedana.bench.local_embed TEXTS.json [--model all-MiniLM-L6-v2] [--queries 30]

TEXTS.json holds a JSON list of strings. Prints one JSON object: import, load and embedding
seconds, texts/s over batches cut as `vedana index` cuts them, single-query latency, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from vedana.bench.measure import percentiles


def measure(texts: list[str], model: str, queries: int) -> dict[str, Any]:
    from vedana.embeddings.base import batches_by_budget
    from vedana.embeddings.local import LocalEmbedder, _load

    t0 = time.perf_counter()
    import sentence_transformers  # noqa: F401  (the import alone takes seconds: torch)

    import_s = time.perf_counter() - t0
    embedder = LocalEmbedder(model)
    t0 = time.perf_counter()
    _load(embedder.model)
    load_s = time.perf_counter() - t0

    embedder.embed(texts[:8])  # first call allocates buffers; keep it out of the rate
    t0 = time.perf_counter()
    done = 0
    for batch in batches_by_budget(texts, embedder.batch_size, embedder.batch_chars):
        embedder.embed(batch)
        done += len(batch)
    embed_s = time.perf_counter() - t0

    single = []
    for text in texts[:queries]:
        t0 = time.perf_counter()
        embedder.embed([text])
        single.append(time.perf_counter() - t0)

    return {
        "model": embedder.model,
        "texts": done,
        "chars": sum(len(t) for t in texts),
        "import_s": round(import_s, 3),
        "load_s": round(load_s, 3),
        "embed_s": round(embed_s, 3),
        "texts_per_s": round(done / embed_s, 1) if embed_s > 0 else None,
        "query_embed": percentiles(single),
        # ru_maxrss is in kB on Linux.
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vedana.bench.local_embed")
    parser.add_argument("texts", type=Path)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args(argv)
    texts = json.loads(args.texts.read_text(encoding="utf-8"))
    print(json.dumps(measure(texts, args.model, args.queries)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
