"""The local embedding model, measured in a child process that lives for the whole benchmark.

Apart from the benchmark, torch's memory (hundreds of MB that never go back to the OS) does not
inflate the peaks of the phases measured after it, and the child's own peak is exact; kept
alive, torch is imported and the model loaded once per run, not once per size.

Protocol (JSON lines): the child prints `{"import_s", "load_s", "torch_threads"}` once ready,
then answers each request `{"windows": [[...], ...], "queries": n}` on stdin with one line:
embedding seconds and texts/s over batches cut as `vedana index` cuts them (each window is a run
of texts in the order the index embeds them, see `sample_windows`; after one warm-up batch),
single-text latency, CPU seconds and peak RSS during the request, and the batch-size sweep.

    python -m bench.local_embed [--model all-MiniLM-L6-v2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from bench.measure import high_water_kb, percentiles, reset_high_water
from vedana.errors import VedanaError


def _load(model: str) -> tuple[Any, dict[str, Any]]:
    from vedana.embeddings.local import LocalEmbedder
    from vedana.embeddings.local import _load as load_model

    t0 = time.perf_counter()
    import sentence_transformers  # noqa: F401  (the import alone takes seconds: torch)

    import_s = time.perf_counter() - t0
    embedder = LocalEmbedder(model)
    t0 = time.perf_counter()
    load_model(embedder.model)
    load_s = time.perf_counter() - t0
    embedder.embed(["warm up the first batch's buffers"])
    import torch

    return embedder, {
        "model": embedder.model,
        "import_s": round(import_s, 3),
        "load_s": round(load_s, 3),
        # CPU seconds count every thread: torch's intra-op pool (one per core by default) included.
        "torch_threads": torch.get_num_threads(),
    }


def sample_windows(total: int, cap: int, align: int, count: int = 4) -> list[tuple[int, int]]:
    """[start, stop) runs of the index's embedding order (shortest text first) to embed instead
    of all `total` texts: all of them when they fit in `cap`, else up to `count` windows of equal
    length, evenly spread over the order (so short and long texts come in the shares a full index
    has), each a whole number of `align`-text blocks starting on a block boundary.

    Contiguous runs, not texts picked across the whole order: a batch of 256 out of a 1,000-text
    sample spans a quarter of the length range and pads to its longest text, while in the sorted
    67k texts of a 100k-row index it spans 1/260 of it; only runs of the real order pad as the
    index pads. `align` is the largest batch cut, so every batch size sees whole batches placed
    where the index would place them."""
    if total <= cap:
        return [(0, total)]
    blocks = total // align  # whole batches of the largest size, in the order
    if cap < align or blocks == 0:  # too small a cap for one whole batch: one run in the middle
        start = (total - cap) // 2 // align * align
        return [(start, start + cap)]
    per = max(cap // align // count, 1)  # blocks per window
    n = min(count, cap // (per * align), blocks // per)
    windows: list[tuple[int, int]] = []
    next_free = 0
    for i in range(n):
        centre = (2 * i + 1) * blocks / (2 * n)  # the middle of the i-th of n equal stretches
        first = min(max(round(centre - per / 2), next_free), blocks - per * (n - i))
        windows.append((first * align, (first + per) * align))
        next_free = first + per
    return windows


def _measure(embedder: Any, windows: list[list[str]], queries: int) -> dict[str, Any]:
    from vedana.embeddings.base import batches_by_budget

    texts = [t for window in windows for t in window]
    longest = max(windows, key=lambda w: sum(map(len, w)))
    embedder.embed(longest[-embedder.batch_size :])  # warm up on a full batch of the longest texts
    exact = reset_high_water()
    cpu0 = time.process_time()  # all threads: torch runs its kernels on one per core
    t0 = time.perf_counter()
    done = 0
    for window in windows:  # each window cut on its own: the index's batches lie within one
        for batch in batches_by_budget(window, embedder.batch_size, embedder.batch_chars):
            embedder.embed(batch)
            done += len(batch)
    embed_s = time.perf_counter() - t0
    single = []
    step = max(len(texts) // max(queries, 1), 1)  # short and long texts alike
    for text in texts[::step][:queries]:
        t0 = time.perf_counter()
        embedder.embed([text])
        single.append(time.perf_counter() - t0)
    cpu_s = time.process_time() - cpu0
    batches = _batch_sweep(embedder, windows)
    peak_kb = high_water_kb() if exact else None
    if peak_kb is None:
        import resource

        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    return {
        "texts": done,
        "windows": [len(w) for w in windows],
        "chars": sum(len(t) for t in texts),
        "embed_s": round(embed_s, 3),
        "texts_per_s": round(done / embed_s, 1) if embed_s > 0 else None,
        "query_embed": percentiles(single),
        "child_cpu_s": round(cpu_s, 3),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        **batches,
    }


SWEEP_BATCHES = (32, 64, 128, 256)
# Each size's CPU is summed over many short turns (one window each, ~2 s), the sizes taking each
# place in the order equally often. Two rounds of whole passes (~8 s per size, each size's best
# kept) were not enough on cores shared with other benchmarks: a burst of load hit one size's pass
# and the best size came out 256, 256, 128, 128, 32, 32 in six runs on the same texts.
SWEEP_ROUNDS = 2


def sweep_turns(sizes: list[int], windows: int, rounds: int = SWEEP_ROUNDS) -> list[tuple[int, int]]:
    """(window, batch size) turns of the sweep: every size embeds every window once per round,
    and the order of the sizes rotates from one window to the next, so over the turns each size
    runs first, second, ... equally often and a change in the machine's load favours none."""
    turns = []
    for round_ in range(rounds):
        for w in range(windows):
            shift = (round_ * windows + w) % len(sizes)
            turns += [(w, size) for size in sizes[shift:] + sizes[:shift]]
    return turns


def _batch_sweep(embedder: Any, windows: list[list[str]]) -> dict[str, Any]:
    """CPU ms per text at each batch size on the same windows (the baseline is the best of them)
    and vedana's own batch size's ratio to it."""
    from vedana.embeddings.base import batches_by_budget

    ours = embedder.batch_size
    sizes = sorted({*SWEEP_BATCHES, ours})
    cpu_s = dict.fromkeys(sizes, 0.0)
    try:
        for w, size in sweep_turns(sizes, len(windows)):
            embedder.batch_size = size
            budget = embedder.batch_chars if size == ours else max(embedder.batch_chars, size * 512)
            cpu0 = time.process_time()
            for batch in batches_by_budget(windows[w], size, budget):
                embedder.embed(batch)
            cpu_s[size] += time.process_time() - cpu0
    finally:
        embedder.batch_size = ours
    count = max(sum(map(len, windows)) * SWEEP_ROUNDS, 1)
    per_text = {size: s * 1000 / count for size, s in cpu_s.items()}
    best = min(per_text, key=lambda k: per_text[k])
    return {
        "batch_size": ours,
        "cpu_ms_per_text_by_batch": {str(k): round(v, 3) for k, v in per_text.items()},
        "best_batch": best,
        "batch_ratio": round(per_text[ours] / per_text[best], 2) if per_text[best] > 0 else None,
    }


def serve(model: str) -> int:
    embedder, ready = _load(model)
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        windows = request["windows"]
        print(json.dumps(_measure(embedder, windows, int(request.get("queries", 30)))), flush=True)
    return 0


def _env_with_repo_on_path() -> dict[str, str]:
    """`bench` lives in the repository, not in the installed wheel: the child finds it through
    PYTHONPATH whatever its working directory is."""
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    return env


class LocalModelProcess:
    """The parent's handle on the child: started on first use, stopped by `close()`."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.ready: dict[str, Any] | None = None
        self._child: subprocess.Popen[str] | None = None
        self._stderr: IO[str] | None = None  # a file, not a pipe: nobody drains it while it runs

    def measure(self, windows: list[list[str]], queries: int = 30) -> dict[str, Any]:
        """Embed the `windows` of texts in the child (see `sample_windows`); the first call also
        reports the import and load time."""
        started_now = self._child is None
        if self._child is None:
            self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115  (closed in close())
            self._child = subprocess.Popen(
                [sys.executable, "-m", "bench.local_embed", "--model", self.model],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                env=_env_with_repo_on_path(),
            )  # fmt: skip
            self.ready = self._read()
        assert self._child.stdin is not None
        self._child.stdin.write(json.dumps({"windows": windows, "queries": queries}) + "\n")
        self._child.stdin.flush()
        result = self._read()
        assert self.ready is not None
        result["model"], result["torch_threads"] = self.ready["model"], self.ready["torch_threads"]
        if started_now:  # the one-off cost of this run lands on the size that paid it
            result["import_s"], result["load_s"] = self.ready["import_s"], self.ready["load_s"]
        return result

    def _read(self) -> dict[str, Any]:
        assert self._child is not None and self._child.stdout is not None
        line = self._child.stdout.readline()
        if not line:
            self._child.wait(timeout=10)
            error: list[str] = []
            if self._stderr is not None:
                self._stderr.seek(0)
                error = self._stderr.read().strip().splitlines()
            self.close()
            raise VedanaError(f"the local-model process failed: {error[-1] if error else 'no output'}")
        return json.loads(line)

    def close(self) -> None:
        if self._child is not None:
            if self._child.stdin is not None and not self._child.stdin.closed:
                self._child.stdin.close()  # end of input: the child exits
            try:
                self._child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            self._child = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_embed")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    return serve(parser.parse_args(argv).model)


if __name__ == "__main__":
    raise SystemExit(main())
