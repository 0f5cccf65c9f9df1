"""`python -m bench` (what `make bench` runs): the benchmark, a table on stdout, a JSON file.

Examples:
    python -m bench                               # 1k, 10k, 100k people rows, every phase
    python -m bench --large                       # adds 300k and 1M
    python -m bench --sizes 50k --phases sync,index --shape regulations
    python -m bench --sizes 10k --phases sync-grist --out /tmp/grist.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.generate import SHAPES
from bench.runner import DEFAULT_PHASES, DEFAULT_SIZES, LARGE_SIZES, PHASES, BenchConfig
from vedana.errors import ConfigError, VedanaError

DEFAULT_OUT = Path("bench/results/latest.json")
_SUFFIX = {"k": 1_000, "m": 1_000_000}


def parse_size(text: str) -> int:
    """`1000`, `10k`, `1.5M`, `100_000` -> rows."""
    cleaned = text.strip().lower().replace("_", "").replace(",", "")
    factor = _SUFFIX.get(cleaned[-1:], 1)
    number = cleaned[:-1] if factor > 1 else cleaned
    try:
        rows = int(float(number) * factor)
    except ValueError:
        raise ConfigError(f"cannot read size {text!r}; use e.g. 1000, 10k or 1M") from None
    return rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark sync, index, search and ask on synthetic knowledge bases, each size in a "
        "fresh VEDANA_HOME on the embedded services. Prints tables; writes JSON.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"phases: {', '.join(PHASES)} (default: all but sync-grist)",
    )
    parser.add_argument("--sizes", help="comma-separated row counts, e.g. 1k,10k,100k (default)")
    parser.add_argument("--large", action="store_true", help="also run 300k and 1M rows")
    parser.add_argument("--phases", help="comma-separated phases to run; prerequisites are added")
    parser.add_argument("--grist", action="store_true", help="also time a sync from the .grist file")
    parser.add_argument("--shape", choices=SHAPES, default="people")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    parser.add_argument(
        "--local-sample", type=int, default=1_024, help="texts the local model embeds per size"
    )
    parser.add_argument("--queries", type=int, default=200, help="vector searches and Cypher lookups")
    parser.add_argument("--asks", type=int, default=20, help="asks with the instant model")
    parser.add_argument(
        "--edit-fraction", type=float, default=0.01, help="share of rows to edit (0.01 = 1 %%)"
    )
    parser.add_argument("--latency-all-sizes", action="store_true", help="latency probes at every size")
    parser.add_argument(
        "--pairs", type=int, default=3,
        help="back-to-back vedana/baseline pairs per ratio (median; 1 = no extra syncs)",
    )  # fmt: skip
    parser.add_argument("--markdown", type=Path, help="also write the tables as Markdown to this file")
    parser.add_argument("--workdir", type=Path, help="where the temporary homes go (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the generated data and homes")
    return parser


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()] if args.sizes else list(DEFAULT_SIZES)
    if args.large:
        sizes += [s for s in LARGE_SIZES if s not in sizes]
    phases = [p.strip() for p in args.phases.split(",") if p.strip()] if args.phases else list(DEFAULT_PHASES)
    if args.grist and "sync-grist" not in phases:
        phases.append("sync-grist")
    if args.pairs < 1:
        raise ConfigError("--pairs must be at least 1")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    return BenchConfig(
        sizes=sorted(set(sizes)),
        phases=phases,
        shape=args.shape,
        seed=args.seed,
        edit_fraction=args.edit_fraction,
        local_sample=args.local_sample,
        queries=args.queries,
        asks=args.asks,
        latency_all_sizes=args.latency_all_sizes,
        pairs=args.pairs,
        workdir=args.workdir,
        keep=args.keep,
    )


class ConsoleStatus:
    """Phase lines on stderr; on a terminal also a one-line live progress of the current stage."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self._live = self.console.is_terminal
        self._status = self.console.status("") if self._live else None
        self._last = 0.0
        if self._status is not None:
            self._status.start()

    def line(self, text: str) -> None:
        self.console.print(text, markup=False)

    def progress(self, stage: str, done: int, total: int | None) -> None:
        if self._status is None:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        self._status.update(f"{stage} {done:,}" + (f"/{total:,}" if total else ""))

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    from bench.report import markdown, render, write_json
    from bench.runner import run

    args = _parser().parse_args(argv)
    status = ConsoleStatus()
    try:
        config = config_from_args(args)
        results = run(config, status=status.line, progress=status.progress)
    except VedanaError as error:
        status.close()
        status.console.print(f"error: {error}", markup=False)
        return error.exit_code
    finally:
        status.close()
    write_json(results, args.out)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(results), encoding="utf-8")
    render(results, Console(highlight=False, width=max(Console().width, 110)))
    status.line(f"wrote {args.out}")
    failed = [size["rows"] for size in results["sizes"] if "error" in size]
    if failed:
        status.line(
            f"error: {len(failed)} size(s) failed ({', '.join(map(str, failed))}); see 'error' in the JSON"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
