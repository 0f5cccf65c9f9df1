"""Consistency: do the graph and the vector tables hold what staging says they should?

Compared per node type and edge label (graph) and per embeddable attribute (vectors), once the
index has caught up with staging; while it has not, the check says so instead of reporting the
expected differences. Also: vectors of another model or dimension than the configured one,
vectors of rows that are gone, and vectors of a text that has since changed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from vedana.etl.graph_load import owned_types
from vedana.ops import inventory
from vedana.problems import Problem, SectionResult, error, warning
from vedana.stores.run_log import last_failure
from vedana.stores.vectors import EDGE_TABLE, NODE_TABLE, ModelInfo, recorded_model

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from vedana.stores.graph import GraphStore


def _rebuild(what: str) -> str:
    return f"run `vedana index --full` to rebuild {what} from staging"


def consistency(engine: Engine, graph: GraphStore | None, configured: ModelInfo | None) -> SectionResult:
    """`graph` None skips the graph comparison (the caller reports why); `configured` None skips
    the model comparison."""
    from vedana.stores.staging import load_data_model

    started = time.monotonic()
    result = SectionResult("consistency")
    with engine.connect() as conn:
        dm = load_data_model(conn, required=False)
        owned = owned_types(conn, dm)
        staging = owned.live()
        version = inventory.staging_version(conn)
        marks = inventory.watermarks(conn)
        result.details.update(staging=staging, staging_version=version, indexed_version=marks.to_dict())
        if not dm.anchors and not staging["nodes"]:
            result.skipped = "nothing is synced yet; run `vedana sync` first"
            return result

        failed = last_failure(conn, "index") if version not in (marks.graph, marks.vectors) else None
        if marks.graph != version:
            result.problems.append(_pending("graph", marks.graph, version, failed))
        elif graph is not None:
            counts = graph.counts(owned.nodes, owned.edges)  # other data on a shared server is not ours
            result.details["graph"] = counts
            result.problems += _compare_graph(staging, counts)

        recorded = recorded_model(conn)
        result.details["embeddings"] = {
            "in_use": None if recorded is None else recorded.describe(),
            "configured": None if configured is None else configured.describe(),
        }
        result.problems += _model_problems(conn, recorded, configured)
        if marks.vectors != version:
            result.problems.append(_pending("vectors", marks.vectors, version, failed))
        else:
            result.problems += _compare_vectors(conn, dm, result.details)
    result.seconds = time.monotonic() - started
    return result


def _pending(target: str, indexed: int | None, version: int, failed: str | None) -> Problem:
    state = "never been indexed" if indexed is None else f"been indexed up to staging version {indexed}"
    if failed is not None:
        # Behind because indexing fails, not because it has not run yet: the knowledge base is
        # stale until someone acts, so this fails the check.
        return error(
            "consistency.index-failing",
            f"the {target} has {state} but staging is at version {version}, and the last index run "
            f"failed ({failed}); fix that and run `vedana index`",
            target=target,
        )
    return warning(
        "consistency.index-pending",
        f"the {target} has {state} but staging is at version {version}, so it is behind; "
        "run `vedana index` (or `vedana run`)",
        target=target,
    )


def _compare_graph(staging: inventory.Counts, graph: dict[str, dict[str, int]]) -> list[Problem]:
    problems = []
    for kind, code, noun in (
        ("nodes", "consistency.graph-nodes", "type"),
        ("edges", "consistency.graph-edges", "link"),
    ):
        want, have = staging[kind], graph.get(kind, {})
        for name in sorted({*want, *have}):
            if want.get(name, 0) != have.get(name, 0):
                problems.append(
                    error(
                        code,
                        f"the graph holds {have.get(name, 0)} {name} {kind} but staging has "
                        f"{want.get(name, 0)}; {_rebuild('the graph')}",
                        **{noun: name},
                    )
                )
    return problems


def _model_problems(
    conn: Connection, recorded: ModelInfo | None, configured: ModelInfo | None
) -> list[Problem]:
    problems = []
    if recorded is not None and configured is not None and recorded != configured:
        problems.append(
            error(
                "consistency.vector-model",
                f"the vectors were made with {recorded.describe()} but the configured model is "
                f"{configured.describe()}, so searches would compare different spaces; run `vedana index` "
                f"to re-embed, or set EMBEDDINGS_MODEL={recorded.model}",
                model=recorded.model,
            )
        )
    if recorded is not None:
        for table, dim in sorted(inventory.vector_column_dims(conn).items()):
            if dim != recorded.dim:
                problems.append(
                    error(
                        "consistency.vector-dimension",
                        f"{table} holds {dim or 'unsized'}-dimensional vectors but the index records "
                        f"{recorded.describe()}; {_rebuild('the vectors')}",
                        table=table,
                    )
                )
    return problems


def _split(key: str) -> dict[str, str]:
    label, _, attribute = key.rpartition(".")
    return {"type": label, "attribute": attribute}


def _compare_vectors(conn: Connection, dm: Any, details: dict[str, Any]) -> list[Problem]:
    problems = []
    want = inventory.expected_vector_counts(conn, dm)
    have = inventory.vector_counts(conn)
    details["vectors"] = have
    orphans = inventory.orphan_vectors(conn)
    stale = inventory.stale_vectors(conn)
    fix = _rebuild("the vectors")
    for kind in ("nodes", "edges"):
        table = NODE_TABLE if kind == "nodes" else EDGE_TABLE
        for key in sorted({*want[kind], *have[kind]}):
            w, h = want[kind].get(key, 0), have[kind].get(key, 0)
            if w != h:
                problems.append(
                    error(
                        "consistency.vector-count",
                        f"{table} holds {h} vectors of {key} but staging has {w} texts to embed; {fix}",
                        **_split(key),
                    )
                )
        for key, n in sorted(orphans[kind].items()):
            problems.append(
                error(
                    "consistency.orphan-vectors",
                    f"{n} vectors of {key} belong to rows no longer in staging; {fix}",
                    **_split(key),
                )
            )
        for key, n in sorted(stale[kind].items()):
            problems.append(
                error(
                    "consistency.stale-vectors",
                    f"{n} vectors of {key} were made from a text that has since changed; {fix}",
                    **_split(key),
                )
            )
    return problems
