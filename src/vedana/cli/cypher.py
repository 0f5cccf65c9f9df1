"""`vedana cypher "MATCH …"`: one read-only query, through the same guard as the agent's tool."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer


def cypher(
    query: Annotated[str, typer.Argument(help="One read-only Cypher query, in quotes.", show_default=False)],
    json_: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=1,
            help="Most rows to return (default CYPHER_ROWS_LIMIT).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run one read-only Cypher query on the graph, exactly as the agent's `cypher` tool does:
    anything that could write is refused before it runs, and so is a label, relationship type or
    property the data model does not have (with the closest real names); rows are capped, and the
    query has a timeout (CYPHER_TIMEOUT_S).

    Examples:

        vedana cypher "MATCH (p:person) RETURN count(p)"

        vedana cypher "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city) RETURN c.city_name AS city, count(p) AS people ORDER BY people DESC" --limit 5

        vedana cypher "CALL db.labels()" --json
    """
    from vedana.agent.tools import run_cypher
    from vedana.cli.output import info, print_json, print_warning
    from vedana.config import get_settings
    from vedana.ops.status import empty_result_note
    from vedana.stores.graph_factory import open_graph

    settings = get_settings()
    with open_graph(settings) as graph:
        outcome = run_cypher(
            graph,
            query,
            row_limit=limit or settings.cypher_rows_limit,
            timeout_s=settings.cypher_timeout_s,
            schema=_schema(settings, graph) if settings.cypher_schema_check else None,
        )
    note = empty_result_note(settings, outcome.rows)  # 0 because nothing is synced here: say so
    if note:
        print_warning(note)
    if json_:
        print_json(outcome.to_dict())
        return
    if sys.stdout.isatty():
        _print_table(outcome.columns, outcome.rows)
    else:
        _print_tsv(outcome.columns, outcome.rows)
    count = len(outcome.rows)
    summary = f"{count} {'row' if count == 1 else 'rows'} in {outcome.elapsed_s:.3f} s"
    if outcome.truncated:
        summary += f"; truncated at {outcome.row_limit} rows, more exist (raise --limit or aggregate)"
    info(summary)


def _schema(settings: Any, graph: Any) -> Any:  # -> vedana.cypher.schema.GraphSchema | None
    """The names the query is checked against; with Postgres out of reach the query still runs,
    unchecked, and stderr says so."""
    from vedana.agent.cypher_schema import synced_graph_schema
    from vedana.cli.output import print_warning
    from vedana.errors import VedanaError

    try:
        return synced_graph_schema(settings, graph)
    except VedanaError as exc:
        print_warning(f"names not checked against the data model: {exc}")
        return None


def cell(value: Any) -> str:
    """A compact, readable rendering of one result value."""
    if isinstance(value, dict) and "labels" in value and "properties" in value:
        labels = "".join(f":{label}" for label in value["labels"])
        return f"({labels} {_props(value['properties'])})"
    if isinstance(value, dict) and "type" in value and "properties" in value:
        return f"[:{value['type']} {_props(value['properties'])}]"
    if isinstance(value, dict) and "nodes" in value and "relationships" in value:
        return " ".join(cell(n) for n in value["nodes"])
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def _props(properties: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in properties.items()) + "}"


def _print_table(columns: list[str], rows: list[dict[str, Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    from vedana.cli.output import stdout_console
    from vedana.redaction import redact

    table = Table(header_style="bold", show_edge=False)
    for column in columns:
        table.add_column(Text(column), overflow="fold")
    for row in rows:
        table.add_row(*(Text(redact(cell(row.get(c)))) for c in columns))  # data, never markup
    stdout_console().print(table)


def _print_tsv(columns: list[str], rows: list[dict[str, Any]]) -> None:
    from vedana.redaction import redact

    def field(value: Any) -> str:
        return cell(value).replace("\t", " ").replace("\n", " ")

    lines = ["\t".join(columns)] + ["\t".join(field(row.get(c)) for c in columns) for row in rows]
    sys.stdout.write(redact("\n".join(lines)) + "\n")
