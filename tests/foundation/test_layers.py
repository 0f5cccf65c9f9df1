"""The architecture holds: imports point down the layers, no two modules import each other in a
circle, docs/architecture.md draws the same layers, and the wheel ships no benchmark."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "vedana"

# Top to bottom: a module may import from its own layer or any layer below, never above.
# The one table of the layers; docs/architecture.md states it in the same words.
LAYERS: list[tuple[str, ...]] = [
    ("cli", "__main__"),
    ("ops", "eval", "mcp"),
    ("etl", "agent"),
    ("stores",),
    ("datamodel",),
    ("sources", "embeddings"),
    ("redaction", "retry", "handoff"),
    ("config", "cypher"),
    ("errors", "problems"),
]
LAYER_OF = {name: depth for depth, names in enumerate(LAYERS) for name in names} | {"__init__": len(LAYERS)}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.parent / name.replace(".", "/")
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _imports() -> dict[str, set[str]]:
    """Every vedana module and the vedana modules it imports, at module level or inside functions."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vedana":
                targets.add(node.module)
                targets.update(
                    f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}")
                )
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.split(".")[0] == "vedana")
        found[_module(path)] = targets
    return found


def _part(module: str) -> str:
    bits = module.split(".")
    return bits[1] if len(bits) > 1 else "__init__"


def test_every_package_has_a_layer() -> None:
    parts = {_part(m) for m in _imports()}
    assert parts - set(LAYER_OF) == set(), "give the new package a layer in LAYERS and docs/architecture.md"


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _imports().items()
        for target in targets
        if LAYER_OF.get(_part(target), 0) < LAYER_OF.get(_part(module), 0)
    )
    assert upward == []


def test_no_import_cycle_between_modules() -> None:
    graph = {m: {t for t in ts if t != m} for m, ts in _imports().items()}
    graph = {m: {t for t in ts if t in graph} for m, ts in graph.items()}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_the_architecture_map_draws_the_same_layers() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawn = " → ".join("/".join(names) for names in LAYERS)
    assert drawn in text, f"docs/architecture.md should state the layers as: {drawn}"
    for names in LAYERS:
        for name in names:
            if (PACKAGE / name).is_dir():
                assert re.search(rf"`{name}/", text), f"docs/architecture.md does not describe {name}/"


@pytest.mark.slow
def test_the_wheel_ships_no_benchmark(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    [wheel] = tmp_path.glob("vedana-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("vedana/cypher/") for n in names)  # the package is there…
    assert not [n for n in names if n.startswith("bench/") or "/bench/" in n]  # …the benchmark is not
    assert not [n for n in names if n.startswith("tests/")]
