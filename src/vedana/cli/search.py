"""`vedana search LABEL PROPERTY "text"`: one vector search, as the agent's tool runs it."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer


def search(
    label: Annotated[str, typer.Argument(help="Anchor noun or link sentence, e.g. Product.")],
    property: Annotated[str, typer.Argument(help="An embeddable attribute of LABEL, e.g. name.")],
    text: Annotated[str, typer.Argument(help="What to look for.")],
    top_n: Annotated[
        int | None,
        typer.Option("--top-n", "-n", min=1, help="Most hits to return [default: the attribute's, else 10]."),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            min=-1.0,
            max=1.0,
            help="Lowest cosine similarity [default: the attribute's, else EMBEDDINGS_THRESHOLD, else the model's].",
        ),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the search and its hits as JSON.")] = False,
) -> None:
    """Find the values of LABEL.PROPERTY most similar in meaning to TEXT.

    Uses the attribute's embed_threshold / embed_top_n from the data model unless given here.

    Examples:

        vedana search Product name "mountain bikes"

        vedana search "sold at" note "window display" --top-n 3 --json
    """
    from vedana.cli.output import info, print_json
    from vedana.config import get_settings
    from vedana.stores.postgres import get_engine
    from vedana.stores.staging import load_data_model
    from vedana.stores.vectors import Retriever, find_target

    settings = get_settings()
    engine = get_engine(settings)
    with engine.connect() as conn:
        target = find_target(load_data_model(conn), label, property)
    with Retriever(settings, engine) as retriever:
        threshold, top_n, hits = retriever.search_target(target, text, threshold=threshold, top_n=top_n)
        model = retriever.store.model()
    if json_:
        print_json(
            {
                "kind": target.kind,
                "label": label,
                "property": property,
                "text": text,
                "threshold": threshold,
                "top_n": top_n,
                "model": model.model,
                "hits": [hit.to_dict() for hit in hits],
            }
        )
        return
    if not hits:
        info(f"no {label}.{property} value has similarity ≥ {threshold} to {text!r}; try --threshold lower")
        return
    rows = [(f"{h.score:.3f}", _hit_id(h), h.value) for h in hits]
    if sys.stdout.isatty():
        _print_table(f"{label}.{property} ≈ {text!r}", rows)
    else:
        for row in rows:
            sys.stdout.write("\t".join(row) + "\n")


def _hit_id(hit: Any) -> str:
    return hit.node_id if hit.kind == "node" else f"{hit.from_node_id} → {hit.to_node_id}"


def _print_table(title: str, rows: list[tuple[str, str, str]]) -> None:
    from rich.table import Table
    from rich.text import Text

    from vedana.cli.output import stdout_console

    table = Table(title=Text(title), title_justify="left", header_style="bold")
    table.add_column("score", justify="right")
    table.add_column("id")
    table.add_column("value")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # data, never markup
    stdout_console().print(table)
