"""Regenerate the command outputs README.md shows, or check that they are current.

    python scripts/readme_outputs.py           # rewrite the blocks in README.md (`make docs`)
    python scripts/readme_outputs.py --check   # exit 1 if README.md differs (`make lint`)

Each block sits between `<!-- docs:NAME -->` and `<!-- /docs:NAME -->`. The commands run through
the real CLI on `samples/regulations`, against embedded services in a throwaway VEDANA_HOME that
are stopped afterwards. Figures that change from run to run (seconds, rates, timestamps) are
written in a stable form, so a second run changes nothing.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SAMPLE = ROOT / "samples" / "regulations"
BLOCK = re.compile(r"(<!-- docs:(?P<name>[\w-]+) -->\n)(.*?)(<!-- /docs:(?P=name) -->)", re.S)

# Volatile figures and their stable forms, applied in order.
STABLE = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\+00:00)?"), "<time>"),
    (re.compile(r"[\d,]+(\.\d+)? (rows|texts)/s"), r"<n> \2/s"),
    (re.compile(r" +\d+\.\d+s\b"), " <s>s"),  # the run table's right-aligned seconds
    (re.compile(r"\b\d+\.\d+ s\b"), "<s> s"),
]


def stable(text: str) -> str:
    for pattern, replacement in STABLE:
        text = pattern.sub(replacement, text)
    return text


class Cli:
    """The vedana CLI in this process, on a fresh home, with no configuration from outside."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def __call__(self, *args: str, show: bool = False) -> str:
        from typer.testing import CliRunner

        from vedana.cli.app import app
        from vedana.config import reset_settings
        from vedana.errors import VedanaError

        reset_settings()
        result = CliRunner().invoke(app, list(args))
        # As a terminal shows it: stdout, then stderr (summaries, errors as `main()` prints them).
        out = result.stdout + result.stderr
        if isinstance(result.exception, VedanaError):
            out += f"error: {result.exception}\n"
        elif result.exception is not None and not isinstance(result.exception, SystemExit):
            raise SystemExit(f"vedana {' '.join(args)} failed: {result.exception!r}")
        head = f"$ vedana {' '.join(_quoted(a) for a in args)}\n" if show else ""
        return head + stable(out.replace(str(SAMPLE), "samples/regulations")).rstrip("\n") + "\n"


def _quoted(arg: str) -> str:
    """An argument as one would type it: double quotes around one with spaces or quotes."""
    return arg if re.fullmatch(r"[\w./:=-]+", arg) else '"' + arg.replace('"', '\\"') + '"'


def _sources() -> list[str]:
    return ["--data-model", str(SAMPLE / "model"), "--data", str(SAMPLE / "data")]


def generate(cli: Cli) -> dict[str, str]:
    """Every block, in the order the commands must run."""
    steps: list[tuple[str, Callable[[], str]]] = [
        ("sync", lambda: cli("sync", *_sources())),
        ("index", lambda: cli("index")),
        (
            "search",
            lambda: cli(
                "search",
                "document_chunk",
                "document_chunk_text",
                "fines for late reporting",
                "--top-n",
                "3",
                show=True,
            ),
        ),
        (
            "cypher",
            lambda: (
                cli(
                    "cypher",
                    "MATCH (d:document)-[:DOCUMENT_covers_REGULATION]->(r:regulation) "
                    "RETURN r.regulation_title AS regulation, count(d) AS documents "
                    "ORDER BY documents DESC, regulation",
                    "--limit",
                    "3",
                    show=True,
                )
                + "\n"
                + cli("cypher", "MATCH (d:document) SET d.document_title = 'x'", show=True)
            ),
        ),
        ("ask", lambda: _ask(cli)),
        ("runs", lambda: cli("runs")),
        ("check", lambda: cli("check", *_sources())),
    ]
    return {name: step() for name, step in steps}


def _ask(cli: Cli) -> str:
    """`vedana ask` through the scripted LLM stand-in the tests use (standins/fake_llm.py):
    the model's moves are scripted, everything else (filter, tools, search, Cypher, trace) is real."""
    import json

    sys.path.insert(0, str(ROOT))
    from standins.fake_llm import FakeLLM, answer, structured, tool_calls

    def results(body: dict) -> list[dict]:
        return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]

    def follow_up(body: dict) -> dict:
        """After the search: look up the best paragraph's document; after that: answer."""
        found = results(body)
        chunk = found[0]["hits"][0]
        if len(found) == 1:
            query = (
                f"MATCH (c:document_chunk {{id: '{chunk['node_id']}'}})-[:DOCUMENT_CHUNK_part_of_DOCUMENT]->"
                "(d:document) RETURN d.document_title AS document"
            )
            return tool_calls(("cypher", {"query": query}))
        row = found[-1]["rows"][0]
        document = row["document"] if isinstance(row, dict) else row[0]
        return answer(f"{chunk['value']} (from {document!r}, paragraph {chunk['node_id']})")

    with FakeLLM() as llm:
        llm.filter.append(
            structured(
                {
                    "reasoning": "A duty is stated in a document's paragraphs; find the paragraph, then its document.",
                    "anchor_nouns": ["document_chunk", "document", "fine"],
                    "link_sentences": ["DOCUMENT_CHUNK_part_of_DOCUMENT"],
                    "anchor_attribute_names": ["document_chunk_text", "document_title"],
                    "link_attribute_names": [],
                    "query_ids": [],
                }
            )
        )
        llm.agent.append(
            tool_calls(
                (
                    "vector_text_search",
                    {
                        "label": "document_chunk",
                        "property": "document_chunk_text",
                        "text": "reporting injuries",
                    },
                )
            )
        )
        llm.agent.append(follow_up)  # a callable answers every later request
        os.environ.update(
            MODEL=llm.model("gpt-4.1-mini"),
            FILTER_MODEL=llm.model("gpt-4.1-nano"),
            VEDANA_LLM_API_BASE=llm.api_base,
            OPENAI_API_KEY="unused",
        )
        try:
            return cli("ask", "When must an employer report a serious injury?", show=True)
        finally:
            for name in ("MODEL", "FILTER_MODEL", "VEDANA_LLM_API_BASE", "OPENAI_API_KEY"):
                os.environ.pop(name, None)


def render(readme: str, blocks: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in blocks:
            raise SystemExit(f"README.md has a block docs:{name} that {Path(__file__).name} does not make")
        return f"{match.group(1)}```\n{blocks[name]}```\n{match.group(4)}"

    return BLOCK.sub(replace, readme)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    home = Path(tempfile.mkdtemp(prefix="vedana-docs-"))
    saved_cwd = Path.cwd()
    for name in list(os.environ):
        if name.startswith(("GRIST_", "MEMGRAPH_", "EMBEDDINGS_", "VEDANA_")) or name in {
            "DB_CONN_URI",
            "MODEL",
        }:
            del os.environ[name]
    os.environ["VEDANA_HOME"] = str(home / "home")
    os.chdir(home)  # no stray .env
    cli = Cli(home / "home")
    try:
        blocks = generate(cli)
    finally:
        cli("services", "stop")
        os.chdir(saved_cwd)
        shutil.rmtree(home, ignore_errors=True)
    before = README.read_text(encoding="utf-8")
    after = render(before, blocks)
    if not check:
        README.write_text(after, encoding="utf-8")
        return 0
    if after != before:
        sys.stdout.writelines(
            difflib.unified_diff(before.splitlines(True), after.splitlines(True), "README.md", "generated")
        )
        print("README.md differs from what `make docs` writes: run `make docs` and commit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
