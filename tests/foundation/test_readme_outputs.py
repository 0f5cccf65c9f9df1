"""The README's command outputs are generated (`make docs`, scripts/readme_outputs.py) and checked
(`make lint`): a changed figure in a generated block fails the check, a second run changes
nothing, and no block showing command output is left outside the generated ones."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)$")
MARKER = re.compile(r"^<!-- (/?)docs:([\w-]+) -->$")

# Fenced blocks that hold commands to type or configuration to write, never a command's output.
INPUT_LANGUAGES = {"bash", "json", "ini", "cron"}
# Untagged blocks that are not outputs either, by how their first line starts.
NOT_OUTPUTS = (
    "Grist (API | CSV export | .grist backup | CSV folder)",  # the how-it-works diagram
    "vedana sync | index | run | ",  # the list of commands
)


def blocks(text: str) -> list[tuple[int, str, list[str], str | None]]:
    """Every fenced block: its line number, language, lines, and the docs marker around it."""
    found, inside, block = [], None, None
    for number, line in enumerate(text.splitlines(), 1):
        if block is not None:
            if line == "```":
                found.append((block[0], block[1], block[2], inside))
                block = None
            else:
                block[2].append(line)
        elif fence := FENCE.match(line):
            block = (number, fence.group(1), [])
        elif marker := MARKER.match(line):
            closing, name = marker.groups()
            assert (inside == name) if closing else inside is None, f"README.md:{number}: unbalanced {line}"
            inside = None if closing else name
    assert block is None and inside is None, "README.md ends inside a block or a marker"
    return found


def test_every_output_block_is_generated() -> None:
    loose = []
    for number, language, lines, marker in blocks(README.read_text(encoding="utf-8")):
        if marker is not None:
            continue
        if language in INPUT_LANGUAGES:
            transcript = [line for line in lines if line.startswith("$ ")]
            assert not transcript, (
                f"README.md:{number}: a ```{language} block holds a transcript: {transcript[0]}"
            )
        elif not lines or not lines[0].startswith(NOT_OUTPUTS):
            loose.append(f"README.md:{number}: {lines[0] if lines else '(empty)'}")
    assert not loose, (
        "blocks outside <!-- docs:NAME --> markers (generate them in scripts/readme_examples.py):\n"
        + "\n".join(loose)
    )


def test_the_checker_finds_these_loose_blocks() -> None:
    """The rule above can fail: a pasted output, or a transcript in a bash block, is caught."""
    pasted = "text\n\n```\nsync: 3 nodes\n```\n\n```bash\n$ vedana sync\nsync: 3 nodes\n```\n"
    found = blocks(pasted)
    assert [(b[1], b[3]) for b in found] == [("", None), ("bash", None)]
    assert not found[0][2][0].startswith(NOT_OUTPUTS) and found[1][2][0].startswith("$ ")


def readme_outputs(*args: str) -> subprocess.CompletedProcess[str]:
    script = ROOT / "scripts" / "readme_outputs.py"
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=ROOT)


def test_a_changed_figure_fails_the_check_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    """On one group (the Grist stand-in's, the quickest): regenerate a copy of the README, change
    a figure in the block, and `--check` reports exactly that line, nothing else."""
    copy = tmp_path / "README.md"
    copy.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    made = readme_outputs("--only", "grist", "--readme", str(copy))
    assert made.returncode == 0, made.stderr

    text = copy.read_text(encoding="utf-8")
    block = re.search(r"<!-- docs:grist-changes -->\n```\n(.*?)```", text, re.S)
    assert block is not None
    line = next(li for li in block.group(1).splitlines() if re.search(r"\d", li))
    changed = re.sub(r"\d", lambda m: str((int(m.group(0)) + 1) % 10), line, count=1)
    copy.write_text(text.replace(line, changed, 1), encoding="utf-8")

    checked = readme_outputs("--check", "--only", "grist", "--readme", str(copy))

    assert checked.returncode == 1
    assert "run `make docs`" in checked.stderr
    diff = [li for li in checked.stdout.splitlines() if li[:1] in "+-" and li[:3] not in ("---", "+++")]
    assert diff == [f"-{changed}", f"+{line}"], checked.stdout
