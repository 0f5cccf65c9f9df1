"""`vedana model`: the synced data model as the agent sees it."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer


def model(
    json_: Annotated[bool, typer.Option("--json", help="Print the data model as JSON.")] = False,
    json_schema: Annotated[
        bool,
        typer.Option(
            "--json-schema", help="Print one JSON Schema per node type and link (what staging holds)."
        ),
    ] = False,
    prompt: Annotated[
        bool,
        typer.Option("--prompt", help="Print the data model exactly as the agent's system prompt holds it."),
    ] = False,
) -> None:
    """Show the data model: anchors (node types) with their attributes (type, whether they are
    searchable by meaning, with the threshold and top-n in force), links (relationship types),
    the playbook queries, prompt overrides and the conversation start message.

    Examples:

        vedana model

        vedana model --json | jq '.anchors[].noun'

        vedana model --json-schema > schema.json

        vedana model --prompt
    """
    from vedana.cli.output import print_json
    from vedana.config import get_settings
    from vedana.ops import model as ops

    settings = get_settings()
    if json_schema:
        print_json(ops.model_json_schema(settings))
    elif json_:
        print_json(ops.model(settings))
    elif prompt:
        from vedana.redaction import redact

        sys.stdout.write(redact(ops.model_prompt_text(settings)) + "\n")
    else:
        _print_tree(ops.model(settings))


def _attribute_label(attr: dict[str, Any]) -> Any:
    from rich.text import Text

    label = Text.assemble((attr["name"], "bold"), f": {attr['dtype'] or 'as the source'}")
    if "search" in attr:
        s = attr["search"]
        label.append(f"  searchable (threshold {s['threshold']:g} from {s['threshold_from']}, top {s['top_n']})",
                     style="green")  # fmt: skip
    if attr["description"]:
        label.append(f"  {attr['description']}", style="dim")
    return label


def _print_tree(data: dict[str, Any]) -> None:
    """A rich tree; values from the data model go in as `Text`, never as markup."""
    from rich.text import Text
    from rich.tree import Tree

    from vedana.cli.output import stdout_console

    root = Tree(Text("data model", style="bold"))
    anchors = root.add(Text(f"anchors ({len(data['anchors'])})", style="bold"))
    for anchor in data["anchors"]:
        head = Text.assemble((f"(:{anchor['noun']})", "bold cyan"))
        if anchor["id_example"]:
            head.append(f" id e.g. {anchor['id_example']}")
        if anchor["description"]:
            head.append(f"  {anchor['description']}", style="dim")
        node = anchors.add(head)
        for attr in anchor["attributes"]:
            node.add(_attribute_label(attr))
    links = root.add(Text(f"links ({len(data['links'])})", style="bold"))
    for link in data["links"]:
        arrow = "->" if link["has_direction"] else "-"
        head = Text.assemble(
            (f"(:{link['anchor1']})-[:{link['sentence']}]{arrow}(:{link['anchor2']})", "bold magenta")
        )
        if link["description"]:
            head.append(f"  {link['description']}", style="dim")
        node = links.add(head)
        for attr in link["attributes"]:
            node.add(_attribute_label(attr))
    queries = root.add(Text(f"playbook queries ({len(data['queries'])})", style="bold"))
    for query in data["queries"]:
        queries.add(Text(f"{query['id']}. {query['name']}")).add(Text(query["example"], style="dim"))
    if data["prompts"]:
        root.add(Text("prompt overrides: " + ", ".join(p["name"] for p in data["prompts"]), style="bold"))
    for event in data["lifecycle"]:
        root.add(Text.assemble((f"{event['event']}: ", "bold"), event["text"]))
    stdout_console().print(root)
