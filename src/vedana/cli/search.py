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
    more_text: Annotated[
        list[str] | None,
        typer.Option(
            "--text",
            help="Another phrasing, searched together with TEXT (repeatable; 5 in all).",
            show_default=False,
        ),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            help="Keep nodes whose attribute meets it: attr=value, attr>=n, attr<=n, "
            "attr~text (contains); repeatable.",
            show_default=False,
        ),
    ] = None,
    expand: Annotated[
        int, typer.Option("--expand", min=0, max=2, help="Show each hit's linked nodes, 1 or 2 hops out.")
    ] = 0,
    mmr: Annotated[bool, typer.Option("--mmr", help="Prefer varied hits over near-duplicates.")] = False,
) -> None:
    """Find the values of LABEL.PROPERTY most similar in meaning to TEXT.

    Uses the attribute's embed_threshold / embed_top_n from the data model unless given here.

    Examples:

        vedana search Product name "mountain bikes"

        vedana search "sold at" note "window display" --top-n 3 --json

        vedana search interest interest_name quokkas --text "marsupials" --expand 1

        vedana search person person_name "Mads" --where "person_age>=40" --where "person_is_mentor=true"
    """
    if more_text or where or expand or mmr:
        _search_graph(
            label, property, [text, *(more_text or [])], where or [], expand, mmr, threshold, top_n, json_
        )
        return
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


def _search_graph(
    label: str, prop: str, texts: list[str], where: list[str], expand: int, mmr: bool,
    threshold: float | None, top_n: int | None, json_: bool,
) -> None:  # fmt: skip
    from vedana.cli.output import info, print_json
    from vedana.config import get_settings
    from vedana.stores.neighbourhood import parse_condition, search_text_neighbourhood

    conditions = [parse_condition(w) for w in where]
    threshold, top_n, hits = search_text_neighbourhood(
        get_settings(), label, prop, texts, where=conditions, expand=expand, mmr=mmr,
        threshold=threshold, top_n=top_n,
    )  # fmt: skip
    if json_:
        search = {
            "kind": "node",
            "label": label,
            "property": prop,
            "texts": texts,
            "expand": expand,
            "mmr": mmr,
        }
        search["where"] = [c.describe() for c in conditions]
        print_json({**search, "threshold": threshold, "top_n": top_n, "hits": [h.to_dict() for h in hits]})
        return
    if not hits:
        info(f"no {label}.{prop} value has similarity ≥ {threshold} to {texts[0]!r}; try --threshold lower")
        return
    for line in neighbourhood_lines([h.to_dict() for h in hits]):
        sys.stdout.write(line + "\n")


def neighbourhood_lines(hits: list[dict[str, Any]]) -> list[str]:
    """Hits, then under each its link groups and their nodes, indented by depth."""
    lines: list[str] = []

    def groups(node: dict[str, Any], indent: str) -> None:
        for group in node.get("links", []):
            arrow = {"out": "->", "in": "<-", "both": "-"}[group["direction"]]
            more = f" (+{group['more']} more)" if group.get("more") else ""
            lines.append(f"{indent}{arrow}[{group['link']}]{arrow} {len(group['nodes'])} node(s){more}")
            for linked in group["nodes"]:
                name = next(
                    (v for k, v in linked["attributes"].items() if "name" in k and isinstance(v, str)), ""
                )
                lines.append(f"{indent}  {linked['label']} {linked['node_id']} {name}".rstrip())
                groups(linked, indent + "    ")

    for hit in hits:
        found = f" (texts {', '.join(map(str, hit['matched_texts']))})" if hit.get("matched_texts") else ""
        lines.append(f"{hit['score']:.3f}\t{hit['node_id']}\t{hit['value']}{found}")
        groups(hit, "    ")
    return lines
