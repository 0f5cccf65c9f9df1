"""The benchmark: for each size, a fresh VEDANA_HOME on the embedded services, then the phases.

Per size, in order (each phase only if chosen; prerequisites are added):

1. generate the knowledge base (CSV folder; also `.grist` for `sync-grist`), start the services;
2. `sync`: full sync of the CSV folder into staging;
3. `index`: full index with the fast hash embedder, so the graph load and the database work are
   visible on their own (the report splits graph / embed / vectors);
4. `rerun`: sync and index again with nothing changed — their reports must show nothing
   written, embedded or deleted;
5. `search`, `cypher`, `ask`: latency probes (at the largest size only, unless asked);
6. `edit`: edit 1 % of the rows in the CSV folder, sync and index again, and check the counts
   (rows rewritten, texts embedded) against what the edit must cause;
7. `embed-local`: the local model on a capped sample of the real texts, in a child process
   that lives for the whole run (torch is imported once; the first size reports that cost);
8. `sync-grist`: a full sync of the same data from the `.grist` file, in another fresh home.

The services are stopped at the end of each size, whatever happens.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.baselines import CopyBaseline, hash_pass, psycopg_url
from bench.edit import edit_csv_folder
from bench.generate import generate
from bench.local_embed import LocalModelProcess
from bench.measure import Meter, Phase, StageClock
from bench.ratios import ratio_entry
from vedana.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.etl.index import IndexReport
    from vedana.etl.sync import SyncReport

PHASES = ("sync", "index", "rerun", "search", "cypher", "ask", "edit", "embed-local", "sync-grist")
DEFAULT_PHASES = tuple(p for p in PHASES if p != "sync-grist")
LATENCY_PHASES = {"search", "cypher", "ask"}
REQUIRES = {
    "index": {"sync"},
    "rerun": {"index"},
    "search": {"index"},
    "cypher": {"index"},
    "ask": {"index"},
    "edit": {"index"},
    "embed-local": {"sync"},
}
DEFAULT_SIZES = (1_000, 10_000, 100_000)
LARGE_SIZES = (300_000, 1_000_000)
FAST_EMBEDDER = "hash-384"  # same dimension as the default local model, so the DB work is alike
LOCAL_MODEL = "all-MiniLM-L6-v2"

Status = Callable[[str], None]
Progress = Callable[[str, int, "int | None"], None]


@dataclass
class BenchConfig:
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    phases: list[str] = field(default_factory=lambda: list(DEFAULT_PHASES))
    shape: str = "people"
    seed: int = 1
    edit_fraction: float = 0.01
    local_sample: int = 1_024  # texts the local model embeds per size: 4 windows of 256 (all if fewer)
    queries: int = 200  # vector searches and Cypher lookups at the latency size
    asks: int = 20
    latency_all_sizes: bool = False
    pairs: int = 3  # back-to-back vedana/baseline pairs per ratio (median taken); 1 = the main run only
    workdir: Path | None = None
    keep: bool = False

    def resolved_phases(self) -> list[str]:
        """The chosen phases plus what they need, in run order."""
        unknown = [p for p in self.phases if p not in PHASES]
        if unknown:
            raise ConfigError(f"unknown phase {unknown[0]!r}; choose from {', '.join(PHASES)}")
        wanted = set(self.phases)
        while True:
            needed = set().union(*(REQUIRES.get(p, set()) for p in wanted)) - wanted
            if not needed:
                break
            wanted |= needed
        return [p for p in PHASES if p in wanted]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sizes": self.sizes,
            "phases": self.resolved_phases(),
            "shape": self.shape,
            "seed": self.seed,
            "edit_fraction": self.edit_fraction,
            "local_sample": self.local_sample,
            "queries": self.queries,
            "asks": self.asks,
            "latency_all_sizes": self.latency_all_sizes,
            "pairs": self.pairs,
            "fast_embedder": FAST_EMBEDDER,
            "local_model": LOCAL_MODEL,
        }


def bench_settings(home: Path, **overrides: Any) -> Settings:
    """Settings on the embedded services in `home`, whatever the environment or `.env` says
    about external services or models."""
    from vedana.config import Settings

    values: dict[str, Any] = {
        "vedana_home": home,
        "db_conn_uri": None,
        "memgraph_uri": None,
        "embeddings_model": FAST_EMBEDDER,
        "embeddings_dim": None,
        "embeddings_threshold": None,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


def sync_stage(stage: str) -> str:
    """Sync's progress stages, grouped: setup (change check, data model), reading and normalising
    the tables (rows stream to Postgres by COPY meanwhile), the diff and write in Postgres."""
    if stage in ("check for changes", "data model"):
        return "setup"
    return stage if stage == "write staging" else "read + normalize"


def index_stage(stage: str) -> str:
    """Index's progress stages, grouped: graph load (nodes, edges, and the vector diff that runs
    before the first text is embedded), embedding (with the cache writes), vector table writes."""
    return {
        "graph nodes": "graph",
        "graph edges": "graph",
        "embed texts": "embed",
        "write vectors": "vectors",
    }.get(stage, stage)


def _rate(count: float, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 and count else None


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole > 0 else None


class SizeRun:
    """One size: its own folder, its own VEDANA_HOME, its own services."""

    def __init__(
        self, config: BenchConfig, rows: int, folder: Path, meter: Meter, status: Status, progress: Progress, *,
        latency: bool, local_model: LocalModelProcess,
    ) -> None:  # fmt: skip
        self.config = config
        self.rows = rows
        self.folder = folder
        self.meter = meter
        self.status = status
        self.progress = progress
        self.local_model = local_model
        self.phases = [p for p in config.resolved_phases() if latency or p not in LATENCY_PHASES]
        self.kb = folder / "kb"
        self.home = folder / "home"
        self.settings = bench_settings(self.home)
        self.result: dict[str, Any] = {"rows": rows, "shape": config.shape, "phases": {}}
        self._engine: Engine | None = None
        self._full_syncs = 0  # scratch databases of `_fresh_full_sync_s`, each a name of its own

    # -- helpers -----------------------------------------------------------------------------
    def _record(self, phase: Phase, **metrics: Any) -> dict[str, Any]:
        entry = {**phase.to_dict(), **metrics}
        self.result["phases"][phase.name] = entry
        return entry

    def _say(self, name: str, entry: dict[str, Any], detail: str = "") -> None:
        self.status(f"[{self.rows:,}] {name}: {entry['seconds']:.2f} s{(' — ' + detail) if detail else ''}")

    def _prog(self, prefix: str, clock: StageClock) -> Progress:
        def on_progress(stage: str, done: int, total: int | None) -> None:
            clock(stage, done, total)
            self.progress(f"[{self.rows:,}] {prefix}: {stage}", done, total)

        return on_progress

    def _sync(self, name: str, source: str = "csv") -> tuple[SyncReport, Phase, dict[str, Any]]:
        from vedana.etl.sync import sync

        if source == "csv":
            model, data = self.kb / "model", self.kb / "data"
        else:
            model, data = self.kb / "model.grist", self.kb / "data.grist"
        with self.meter.phase(name) as phase:
            clock = StageClock(self.meter, sync_stage)
            report = sync(self.settings, data_model=model, data=data, on_progress=self._prog(name, clock))
            stages = clock.finish()
        return report, phase, stages

    def _index(self, name: str) -> tuple[IndexReport, Phase, dict[str, Any]]:
        from vedana.etl.index import index

        with self.meter.phase(name) as phase:
            clock = StageClock(self.meter, index_stage)
            report = index(self.settings, on_progress=self._prog(name, clock))
            stages = clock.finish()
        return report, phase, stages

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self._generate()
        main_phases = [p for p in self.phases if p != "sync-grist"]
        if main_phases:
            try:
                self._start_services()
                for name in main_phases:
                    getattr(self, "_phase_" + name.replace("-", "_"))()
            finally:
                self._stop_services(self.home)
        if "sync-grist" in self.phases:
            self._phase_sync_grist()
        return self.result

    def _generate(self) -> None:
        fmt = "both" if "sync-grist" in self.phases else "csv"
        self.status(f"[{self.rows:,}] generating a {self.config.shape} knowledge base ({fmt})")
        with self.meter.phase("generate") as phase:
            manifest = generate(self.config.shape, self.rows, self.config.seed, self.kb, fmt)
        self.manifest = manifest
        csv_bytes = sum(p.stat().st_size for p in (self.kb / "data").glob("*.csv"))
        self._record(
            phase, rows=manifest["rows"], rows_per_s=_rate(manifest["rows"], phase.seconds),
            tables=manifest["tables"], csv_mb=round(csv_bytes / 2**20, 2),
        )  # fmt: skip
        self.result["expected"] = manifest["expected"]

    def _start_services(self) -> None:
        from vedana.stores.embedded_falkordb import ensure_falkordb, falkordb_status
        from vedana.stores.embedded_postgres import postgres_status
        from vedana.stores.postgres import get_engine

        with self.meter.phase("services") as phase:
            self._engine = get_engine(self.settings)
            ensure_falkordb(self.home)
        self.meter.watch_services(
            {"postgres": postgres_status(self.home)["pid"], "falkordb": falkordb_status(self.home)["pid"]}
        )
        entry = self._record(phase, what="start embedded Postgres (initdb) + FalkorDB, create the schema")
        self._say("services", entry)

    def _stop_services(self, home: Path) -> None:
        from vedana.stores.embedded_falkordb import falkordb_status, stop_falkordb
        from vedana.stores.embedded_postgres import postgres_status, stop_postgres

        self.meter.watch_services({})
        if home == self.home and self._engine is not None:
            self.result["storage_mb"] = {
                "postgres": round(postgres_status(home)["size_bytes"] / 2**20, 1),
                "falkordb": round(falkordb_status(home)["size_bytes"] / 2**20, 1),
            }
            self._engine.dispose()
            self._engine = None
        stop_falkordb(home)
        stop_postgres(home)

    # -- phases ----------------------------------------------------------------------------------
    def _phase_sync(self) -> None:
        report, phase, stages = self._sync("sync")
        data = report.to_dict()
        nodes = {k: v["loaded"] for k, v in data["nodes"].items()}
        edges = {k: v["loaded"] for k, v in data["edges"].items()}
        expected = self.manifest["expected"]
        counts_match = nodes == expected["nodes"] and edges == expected["edges"]
        entry = self._record(
            phase, rows_read=report.rows_read, rows_per_s=_rate(report.rows_read, phase.seconds),
            staging_rows=sum(nodes.values()) + sum(edges.values()),
            nodes=sum(nodes.values()), edges=sum(edges.values()), counts_match_generator=counts_match,
            stages=stages,
        )  # fmt: skip
        if not counts_match:
            entry["counts"] = {"nodes": nodes, "edges": edges}
        self._say("sync", entry, f"{entry['rows_per_s'] or 0:,.0f} rows/s")
        self._sync_vs_copy(entry)

    def _sync_vs_copy(self, sync_entry: dict[str, Any]) -> None:
        """The full sync against COPY of the rows it produced into staging-shaped tables: pair 1
        is the sync just measured and a COPY right after it; each further pair is a first sync
        into a fresh database of the same server, then the COPY again."""
        assert self._engine is not None
        dump = CopyBaseline(self.folder / "staging-dump")
        try:
            dump.dump(self._engine)  # not timed: the rows as vedana finished them
            with self.meter.phase("sync-copy") as phase:
                copy_s = dump.timed_copy(self._engine)
            pairs = [(sync_entry["seconds"], copy_s)]
            self._record(phase, **dump.to_dict())
            if self.config.pairs > 1:
                with self.meter.phase("sync-pairs") as phase:
                    for n in range(2, self.config.pairs + 1):
                        pairs.append(self._fresh_sync_and_copy(dump, n))
                self._record(phase, pairs=[[round(v, 4), round(b, 4)] for v, b in pairs[1:]])
        finally:
            shutil.rmtree(dump.folder, ignore_errors=True)
        rows = sum(dump.rows.values())
        sync_entry["ratios"] = [
            ratio_entry(
                "full sync, CSV folder → staging", pairs,
                f"COPY of the same {rows:,} staging rows", "≤ 1.5×",
            )
        ]  # fmt: skip
        ratio = sync_entry["ratios"][0]
        self.status(
            f"[{self.rows:,}] sync vs COPY: {ratio['ratio']:.2f}× (median of {len(pairs)}; "
            f"COPY {ratio['baseline_s']:.2f} s)"
        )

    def _fresh_sync_and_copy(self, dump: CopyBaseline | None, n: int | str) -> tuple[float, float]:
        """(sync seconds, COPY seconds) in a new empty database on the same server: a true first
        sync again, whatever state vedana keeps (no COPY without `dump`: 0). Creating the database
        and its schema is not timed."""
        import psycopg

        from vedana.etl.sync import sync
        from vedana.stores.postgres import get_engine

        assert self._engine is not None
        name = f"bench_pair_{self.rows}_{n}"  # a new URL: never a cached engine
        admin = psycopg_url(self._engine)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        url = self._engine.url.set(database=name).render_as_string(hide_password=False)
        settings = bench_settings(self.home, db_conn_uri=url)
        engine = get_engine(settings)  # the schema is made here
        try:
            started = time.perf_counter()
            sync(settings, data_model=self.kb / "model", data=self.kb / "data")
            sync_s = time.perf_counter() - started
            copy_s = dump.timed_copy(engine) if dump is not None else 0.0
        finally:
            engine.dispose()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return sync_s, copy_s

    def _phase_index(self) -> None:
        report, phase, stages = self._index("index")
        self.full_index = report
        seconds = report.phase_seconds
        entry = self._record(
            phase,
            embedder=report.model,
            read_s=seconds.get("read", 0.0),
            graph_s=seconds.get("graph", 0.0),
            graph_rows=report.graph_rows,
            nodes=report.nodes_upserted,
            edges=report.edges_upserted,
            graph_rows_per_s=_rate(report.graph_rows, seconds.get("graph", 0.0)),
            embed_s=seconds.get("embed", 0.0),
            texts_embedded=report.texts_embedded,
            texts_per_s=_rate(report.texts_embedded, seconds.get("embed", 0.0)),
            vectors_s=seconds.get("vectors", 0.0),
            values_written=report.values_written,
            values_per_s=_rate(report.values_written, seconds.get("vectors", 0.0)),
            stages=stages,
        )
        self._say(
            "index", entry,
            f"graph {entry['graph_rows_per_s'] or 0:,.0f} rows/s, {report.texts_embedded:,} texts, "
            f"vectors {entry['vectors_s']:.2f} s",
        )  # fmt: skip
        self._graph_baselines(entry, seconds.get("graph", 0.0))

    def _graph_baselines(self, entry: dict[str, Any], graph_s: float) -> None:
        """GRAPH.BULK and raw UNWIND of the rows just loaded (`bench/graph_baselines.py`), in the
        index entry with their ratios."""
        from bench.graph_baselines import graph_baselines
        from vedana.stores.graph_falkordb import FalkorGraph

        graph = FalkorGraph.embedded(self.home)
        engine = self._engine
        assert engine is not None

        from vedana.etl.graph_load import owned_types, rebuild_graph
        from vedana.stores.index_state import staging_version
        from vedana.stores.staging import load_data_model, staged_by

        with engine.connect() as conn:  # read before the index's graph phase starts its clock
            dm = load_data_model(conn)
            typed_by = dm if staged_by(conn, dm) else None
            upto = staging_version(conn)

        def rebuild() -> None:
            """The graph phase of `vedana index --full`: the rebuild and the nodes' check."""
            with engine.connect() as conn:
                owned = owned_types(conn, dm, edges=False)
                rebuild_graph(conn, graph, upto, owned.nodes, dm=typed_by)
                graph.counts(owned.nodes, ())

        try:
            found = graph_baselines(engine, graph, graph_s, pairs=self.config.pairs, rebuild=rebuild)
        finally:
            graph.close()
        entry.setdefault("ratios", []).extend(found.pop("ratios"))
        entry["graph_baselines"] = found
        detail = ", ".join(f"{r['ratio']}× {r['baseline']}" for r in entry["ratios"][-2:])
        self.status(f"[{self.rows:,}] graph limits: {detail}")

    def _phase_rerun(self) -> None:
        sync_report, sync_phase, _ = self._sync("rerun-sync")
        index_report, index_phase, _ = self._index("rerun-index")
        totals = sync_report.to_dict()["totals"]
        sync_proof = {
            "written": totals["nodes"]["written"] + totals["edges"]["written"],
            "deleted": totals["nodes"]["deleted"] + totals["edges"]["deleted"],
            "unchanged": totals["nodes"]["unchanged"] + totals["edges"]["unchanged"],
            "stopped_early": sync_report.unchanged_early,
        }
        index_proof = {
            "graph_rows": index_report.graph_rows,
            "texts_embedded": index_report.texts_embedded,
            "values_written": index_report.values_written,
            "values_deleted": index_report.values_deleted,
        }
        full = self.result["phases"]
        nothing = not (sync_proof["written"] or sync_proof["deleted"] or any(index_proof.values()))
        s = self._record(
            sync_phase, proof=sync_proof, vs_full=_ratio(sync_phase.seconds, full["sync"]["seconds"])
        )
        i = self._record(
            index_phase, proof=index_proof, vs_full=_ratio(index_phase.seconds, full["index"]["seconds"])
        )
        self.result["rerun_nothing_rewritten"] = nothing
        self._say("rerun sync", s, f"{s['vs_full']:.1%} of the full sync")
        self._say("rerun index", i, f"{i['vs_full']:.1%} of the full index; nothing rewritten: {nothing}")

    def _phase_edit(self) -> None:
        data = self.kb / "data"
        previous = hash_pass(data).hashes  # the baseline's "last run", before the edit; not timed
        with self.meter.phase("edit-files") as phase:
            summary = edit_csv_folder(data, self.config.shape, self.config.edit_fraction)
        self._record(phase, **summary.to_dict())
        # The baseline first, then its hashes are dropped: they must not swell vedana's peak.
        with self.meter.phase("edit-hash") as phase:
            found = hash_pass(data, previous)
        del previous
        self._record(phase, **found.to_dict(), found_the_edit=self._found_edit(found, summary.edited))
        found.hashes.clear()
        sync_report, sync_phase, _ = self._sync("edit-sync")
        pairs = [(sync_phase.seconds, found.seconds)]
        fulls = [self._fresh_full_sync_s()]
        index_report, index_phase, _ = self._index("edit-index")
        totals = sync_report.to_dict()["totals"]
        seen = {
            "nodes_changed": totals["nodes"]["written"],
            "edges_changed": totals["edges"]["written"],
            "graph_rows": index_report.graph_rows,
            "texts_embedded": index_report.texts_embedded,
            "values_written": index_report.values_written,
        }
        expected = {
            "nodes_changed": summary.nodes_changed,
            "edges_changed": summary.edges_changed,
            "graph_rows": summary.nodes_changed + summary.edges_changed,
            "texts_embedded": summary.texts_changed,
            "values_written": summary.values_changed,
        }
        full = self.result["phases"]
        s = self._record(sync_phase, vs_full=_ratio(sync_phase.seconds, full["sync"]["seconds"]))
        i = self._record(
            index_phase,
            vs_full=_ratio(index_phase.seconds, full["index"]["seconds"]),
            embed_s=index_report.phase_seconds.get("embed", 0.0),
            graph_s=index_report.phase_seconds.get("graph", 0.0),
            vectors_s=index_report.phase_seconds.get("vectors", 0.0),
        )
        self.result["edit_check"] = {
            "expected": expected,
            "seen": seen,
            "ok": seen == expected,
            "embedding_calls_equal_changed_values": seen["texts_embedded"] == expected["texts_embedded"],
        }
        self._say("edit sync", s, f"{s['vs_full']:.1%} of the full sync")
        self._say(
            "edit index", i,
            f"{i['vs_full']:.1%} of the full index; texts embedded {seen['texts_embedded']:,} "
            f"(changed values {expected['texts_embedded']:,}) {'ok' if seen == expected else 'MISMATCH'}",
        )  # fmt: skip
        if self.config.pairs > 1:
            with self.meter.phase("edit-pairs") as phase:
                rounds = [self._edit_round() for _ in range(2, self.config.pairs + 1)]
            pairs += [(r["sync_s"], r["hash_s"]) for r in rounds]
            fulls += [r["full_sync_s"] for r in rounds]
            self._record(phase, rounds=rounds)
        s["ratios"] = self._edit_ratios(pairs, fulls)
        edit, whole = s["ratios"]
        self.status(
            f"[{self.rows:,}] edit re-sync: {edit['ratio']:.1f}× read + hash + compare "
            f"({edit['baseline_s']:.2f} s), {whole['ratio']:.1%} of a full sync (median of {len(pairs)})"
        )
        self._append_rounds()

    def _append_rounds(self) -> None:
        """The other everyday change: the same share of rows appended at the end of every data
        table (`bench/edit.py: append_csv_folder`), then sync and index; per extra pair the same
        again (`append-pairs`). Each sync must take the incremental path and add exactly the
        appended rows (`append_check`)."""
        from bench.edit import append_csv_folder

        data = self.kb / "data"
        with self.meter.phase("append-files") as phase:
            summary = append_csv_folder(data, self.config.shape, self.config.edit_fraction, tag="a1")
        self._record(phase, **summary.to_dict())
        report, sync_phase, _ = self._sync("append-sync")
        checks = [self._appended(summary, report)]
        timed = [(sync_phase.seconds, self._full_sync_s())]
        entry = self._record(
            sync_phase, vs_full=_ratio(sync_phase.seconds, self.result["phases"]["sync"]["seconds"])
        )
        _, index_phase, _ = self._index("append-index")
        self._record(
            index_phase, vs_full=_ratio(index_phase.seconds, self.result["phases"]["index"]["seconds"])
        )
        if self.config.pairs > 1:
            with self.meter.phase("append-pairs") as phase:
                rounds = [self._append_round(n) for n in range(2, self.config.pairs + 1)]
            self._record(phase, rounds=[r for r, _ in rounds])
            checks += [check for _, check in rounds]
            timed += [(r["sync_s"], self._full_sync_s()) for r, _ in rounds]
        ok = all(c["ok"] for c in checks)
        self.result["append_check"] = {"ok": ok, "rounds": checks}
        share = f"{self.config.edit_fraction:.0%}".replace("%", " %")
        ratio = ratio_entry(f"{share} rows appended, re-sync ÷ full sync", timed, "full sync", "")
        entry["ratios"] = [ratio]
        self.status(
            f"[{self.rows:,}] append re-sync: {ratio['vedana_s']:.2f} s, {ratio['ratio']:.1%} of a full "
            f"sync (median of {len(timed)}); {'every row added, incrementally' if ok else 'CHECK FAILED'}"
        )

    def _append_round(self, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
        from bench.edit import append_csv_folder
        from vedana.etl.index import index
        from vedana.etl.sync import sync

        data = self.kb / "data"
        summary = append_csv_folder(data, self.config.shape, self.config.edit_fraction, tag=f"a{n}")
        started = time.perf_counter()
        report = sync(self.settings, data_model=self.kb / "model", data=data)
        sync_s = time.perf_counter() - started
        index(self.settings)
        return {"rows_appended": summary.appended, "sync_s": round(sync_s, 4)}, self._appended(
            summary, report
        )

    @staticmethod
    def _appended(summary: Any, report: Any) -> dict[str, Any]:
        """What an append's sync must do (add exactly the appended rows, on the incremental path)
        against what it reported."""
        totals = report.to_dict()["totals"]
        seen = {"nodes_added": totals["nodes"]["written"], "edges_added": totals["edges"]["written"]}
        expected = {"nodes_added": summary.nodes_added, "edges_added": summary.edges_added}
        paths = sorted(set(report.paths.values()))
        incremental = bool(paths) and all(p.startswith("incremental: ") for p in paths)
        return {"expected": expected, "seen": seen, "paths": paths, "ok": seen == expected and incremental}

    def _full_sync_s(self) -> float:
        """The full sync the edit and append ratios divide by: the median of the full syncs timed
        for the COPY ratio, when there are several."""
        sync = self.result["phases"]["sync"]
        full = next(
            (r["vedana_s"] for r in sync.get("ratios", []) if r["measure"].startswith("full sync")), None
        )
        return float(full or sync["seconds"])

    @staticmethod
    def _found_edit(found: Any, edited: int) -> bool:
        """The baseline saw exactly the edit: every edited row changed, nothing new or gone."""
        return bool(found.changed == edited and not found.new and not found.gone)

    def _edit_round(self) -> dict[str, Any]:
        """One more back-to-back pair: edit the same share of rows again, read + hash + compare
        (timed), vedana's sync (timed), then index so the home stays as a user's would."""
        from vedana.etl.index import index
        from vedana.etl.sync import sync

        data = self.kb / "data"
        previous = hash_pass(data).hashes
        summary = edit_csv_folder(data, self.config.shape, self.config.edit_fraction)
        found = hash_pass(data, previous)
        del previous
        found.hashes.clear()
        started = time.perf_counter()
        sync(self.settings, data_model=self.kb / "model", data=data)
        sync_s = time.perf_counter() - started
        full_s = self._fresh_full_sync_s()
        index(self.settings)
        return {
            "rows_edited": summary.edited,
            "sync_s": round(sync_s, 4),
            "full_sync_s": round(full_s, 4),
            "hash_s": round(found.seconds, 4),
            "found_the_edit": self._found_edit(found, summary.edited),
        }

    def _fresh_full_sync_s(self) -> float:
        """A first sync of the data as it is now, into a new database: what an edit's re-sync is
        set against, timed right after it (the machine's speed drifts by ±10-20 % over the
        minutes between the sync phase and the edit pairs)."""
        self._full_syncs += 1
        return self._fresh_sync_and_copy(None, f"full{self._full_syncs}")[0]

    def _edit_ratios(self, pairs: list[tuple[float, float]], fulls: list[float]) -> list[dict[str, Any]]:
        """The edit's re-sync against read + hash + compare, and against a full sync of the same
        data timed right after it (`_fresh_full_sync_s`), pair by pair."""
        share = f"{self.config.edit_fraction:.0%}".replace("%", " %")
        return [
            ratio_entry(
                f"{share} edit re-sync", pairs, "read + hash + compare", "",
            ),
            ratio_entry(
                f"{share} edit re-sync ÷ full sync",
                [(v, full) for (v, _), full in zip(pairs, fulls, strict=True)], "full sync", "≤ 10 %",
            ),
        ]  # fmt: skip

    def _phase_search(self) -> None:
        from bench.probes import probe_search

        assert self._engine is not None
        with self.meter.phase("search") as phase:
            found = probe_search(self.settings, self._engine, self.config.queries)
        entry = self._record(phase, **found)
        # Node and edge vectors are two HNSW indexes: name both sizes, not only their sum.
        counts = found.get("vectors") or {}
        vectors = " + ".join(f"{kind} {n:,}" for kind, n in sorted(counts.items(), reverse=True) if n)
        entry["ratios"] = [
            ratio_entry(
                f"vector search {q} ({vectors or 0} vectors)",
                [(r["vedana"][f"{q}_ms"] / 1000, r["baseline"][f"{q}_ms"] / 1000) for r in found["rounds"]],
                "same SQL, bare psycopg", "≤ 1.2×",
            )
            for q in ("p50", "p95")
            if found["rounds"] and all(r["baseline"].get(f"{q}_ms") for r in found["rounds"])
        ]  # fmt: skip
        lat = found["latency"]
        self._say("search", entry, f"p50 {lat.get('p50_ms', 0):.1f} ms, p95 {lat.get('p95_ms', 0):.1f} ms")

    def _phase_cypher(self) -> None:
        from bench.probes import probe_cypher
        from vedana.stores.graph_factory import open_graph

        assert self._engine is not None
        with self.meter.phase("cypher") as phase, open_graph(self.settings) as graph:
            found = probe_cypher(self.settings, self._engine, graph, self.config.shape, self.config.queries)
        entry = self._record(phase, **found)
        lat, agg = found["lookup"], found["aggregate"]
        self._say(
            "cypher", entry,
            f"lookup p50 {lat.get('p50_ms', 0):.1f} ms, p95 {lat.get('p95_ms', 0):.1f} ms; "
            f"aggregate p50 {agg.get('p50_ms', 0):.0f} ms",
        )  # fmt: skip

    def _phase_ask(self) -> None:
        from bench.probes import probe_ask

        assert self._engine is not None
        with self.meter.phase("ask") as phase:
            found = probe_ask(self.settings, self._engine, self.config.shape, self.config.asks)
        entry = self._record(phase, **found)
        out = found["outside_llm"]
        self._say(
            "ask",
            entry,
            f"outside the LLM p50 {out.get('p50_ms', 0):.1f} ms, p95 {out.get('p95_ms', 0):.1f} ms",
        )

    def _phase_embed_local(self) -> None:
        windows, total = self._texts_windows(self.config.local_sample)
        texts = sum(map(len, windows))
        with self.meter.phase("embed-local") as phase:
            measured = self.local_model.measure(windows) if texts else {"texts": 0, "texts_per_s": None}
        rate = measured.get("texts_per_s") or 0
        full_s = round(total / rate, 1) if rate else None
        entry = self._record(
            phase, **measured, texts_total=total, sampled=texts < total,
            estimated_full_embed_s=full_s,
        )  # fmt: skip
        by_batch, ours, best = (
            measured.get("cpu_ms_per_text_by_batch"),
            measured.get("batch_size"),
            measured.get("best_batch"),
        )
        if by_batch and ours and best and by_batch[str(best)] > 0:
            entry["ratios"] = [
                ratio_entry(
                    f"local model CPU per text, batch {ours}",
                    [(by_batch[str(ours)] / 1000, by_batch[str(best)] / 1000)],
                    f"best batch ({best})", "≤ 1.1×",
                )
            ]  # fmt: skip
        sample = (
            f"{len(windows)} windows, {texts:,}/{total:,} texts" if texts < total else f"all {total:,} texts"
        )
        self._say("embed-local", entry, f"{rate:,.0f} texts/s on {sample}; full embed ≈ {full_s} s")

    def _texts_windows(self, cap: int) -> tuple[list[list[str]], int]:
        """Runs of the distinct embeddable texts in staging (what a full index would embed), in
        the order the index embeds them (`vector_writes.prepare`: by length, then text), picked
        by `sample_windows` to hold at most `cap` texts; and how many distinct texts there are."""
        from bench.local_embed import SWEEP_BATCHES, sample_windows
        from vedana.embeddings.local import LocalEmbedder
        from vedana.etl.embed_values import embed_targets
        from vedana.stores.staging import load_data_model

        assert self._engine is not None
        with self._engine.connect() as conn:
            targets = embed_targets(load_data_model(conn))
            parts, params = [], {}
            for n, (kind, label, attribute) in enumerate(targets):
                table, col = ("nodes", "node_type") if kind == "node" else ("edges", "edge_label")
                parts.append(
                    f"SELECT attributes ->> %(a{n})s AS t FROM {table} WHERE {col} = %(l{n})s AND NOT deleted "
                    f"AND jsonb_typeof(attributes -> %(a{n})s) = 'string'"
                )
                params |= {f"a{n}": attribute, f"l{n}": label}
            if not parts:
                return [], 0
            union = " UNION ".join(parts)
            total = int(conn.exec_driver_sql(f"SELECT count(*) FROM ({union}) u", params).scalar() or 0)
            align = max(*SWEEP_BATCHES, LocalEmbedder.batch_size)
            spans = sample_windows(total, cap, align)
            picked = " OR ".join(f"rn >= {start} AND rn < {stop}" for start, stop in spans)
            rows = conn.exec_driver_sql(
                f"SELECT rn, t FROM (SELECT t, row_number() OVER (ORDER BY length(t), t) - 1 AS rn "
                f"FROM ({union}) u) o WHERE {picked} ORDER BY rn",
                params,
            )
            windows: list[list[str]] = [[] for _ in spans]
            for rn, text in rows:
                windows[next(i for i, (_, stop) in enumerate(spans) if rn < stop)].append(text)
            return windows, total

    def _phase_sync_grist(self) -> None:
        from vedana.stores.embedded_postgres import postgres_status
        from vedana.stores.postgres import get_engine

        home = self.folder / "home-grist"
        self.settings, main_settings = bench_settings(home), self.settings
        engine = None
        try:
            engine = get_engine(self.settings)
            self.meter.watch_services({"postgres": postgres_status(home)["pid"]})
            report, phase, stages = self._sync("sync-grist", source="grist")
            entry = self._record(
                phase,
                rows_read=report.rows_read,
                rows_per_s=_rate(report.rows_read, phase.seconds),
                stages=stages,
            )
            self._say("sync-grist", entry, f"{entry['rows_per_s'] or 0:,.0f} rows/s")
        finally:
            if engine is not None:
                engine.dispose()
            self._stop_services(home)
            self.settings = main_settings


def run(config: BenchConfig, *, status: Status, progress: Progress) -> dict[str, Any]:
    """Run every size; the results as a JSON-able dict."""
    from bench.machine import machine_end, machine_info

    if not config.sizes:
        raise ConfigError("no sizes to run; pass --sizes, e.g. --sizes 1k,10k")
    config.resolved_phases()  # fail on an unknown phase before any work
    started = time.time()
    machine = machine_info()
    sizes = sorted(config.sizes)
    results: dict[str, Any] = {
        "benchmark": "vedana",
        "version": _version(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "machine": machine,
        "config": config.to_dict(),
        "sizes": [],
    }
    root = Path(tempfile.mkdtemp(prefix="vedana-bench-", dir=config.workdir))
    local_model = LocalModelProcess(LOCAL_MODEL)
    try:
        with Meter() as meter:
            results["exact_memory_peaks"] = meter.exact_peaks
            for rows in sizes:
                latency = config.latency_all_sizes or rows == sizes[-1]
                size_run = SizeRun(
                    config, rows, root / f"rows-{rows}", meter, status, progress,
                    latency=latency, local_model=local_model,
                )  # fmt: skip
                try:
                    results["sizes"].append(size_run.run())
                except Exception as exc:  # keep what was measured; the next size may still run
                    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    size_run.result["error"] = f"{type(exc).__name__}: {message}"
                    results["sizes"].append(size_run.result)
                    status(f"[{rows:,}] failed: {size_run.result['error']}")
                if not config.keep:
                    shutil.rmtree(root / f"rows-{rows}", ignore_errors=True)
    finally:
        local_model.close()
        if not config.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            status(f"kept the knowledge bases and homes under {root}")
    machine_end(machine)
    results["wall_s"] = round(time.time() - started, 1)
    return results


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vedana")
    except PackageNotFoundError:
        return "unknown"
