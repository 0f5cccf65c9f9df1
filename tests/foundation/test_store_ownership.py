"""Only `vedana/stores/` speaks to Postgres: no other module imports psycopg, SQLAlchemy or
pgvector at runtime (type-only imports under `if TYPE_CHECKING:` are fine), holds an SQL
statement, or runs one. The Grist sources are the named exceptions: their SQL goes to Grist's
`/sql` endpoint or a `.grist` SQLite file, never to Postgres."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import vedana

PACKAGE = Path(vedana.__file__).parent
POSTGRES_LIBRARIES = {"sqlalchemy", "psycopg", "psycopg2", "psycopg_pool", "pgvector"}

# Not Postgres: Grist's /sql endpoint (SQLite dialect) and .grist files (SQLite); locate.py reads
# Grist's own `_grist_*` metadata to link an answer's rows back to their page.
GRIST_SOURCES = {
    "sources/grist_api.py",
    "sources/grist_http.py",
    "sources/grist_file.py",
    "sources/locate.py",
}

STATEMENT = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|TRUNCATE\s|ANALYZE\s|SHOW\s|COPY\s"
    r"|CREATE\s+(TEMP\s+|TEMPORARY\s+|UNIQUE\s+)?(TABLE|INDEX|EXTENSION|SEQUENCE)\s"
    r"|DROP\s+(TABLE|INDEX|SEQUENCE)\s|ALTER\s+TABLE\s|WITH\s+\w+\s+AS\s*\()"
)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under `if TYPE_CHECKING:`."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking_only(child):
                stack.extend(child.orelse)
                continue
            stack.append(child)
    return out


def postgres_uses(source: str) -> list[str]:
    """What in `source` speaks to Postgres: runtime imports, SQL statements, statement calls."""
    found: list[str] = []
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            names = []
        found += [f"line {node.lineno}: imports {n}" for n in names if n.split(".")[0] in POSTGRES_LIBRARIES]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and STATEMENT.match(node.value):
            found.append(f"line {node.lineno}: SQL {node.value.strip()[:40]!r}")
        if isinstance(node, ast.Attribute) and node.attr == "exec_driver_sql":
            found.append(f"line {node.lineno}: exec_driver_sql")
    return found


def test_only_stores_speak_to_postgres() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith("stores/") or name in GRIST_SOURCES:
            continue
        uses = postgres_uses(path.read_text(encoding="utf-8"))
        if uses:
            offenders[name] = uses
    assert offenders == {}, "move these into a module of vedana/stores/: " + repr(offenders)


def test_the_detector_finds_what_it_forbids() -> None:
    """The check above can fail: statements, runtime imports and calls are all seen, type-only
    imports and prose are not."""
    flagged = postgres_uses(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from sqlalchemy import Engine\n"
        "def f(conn):\n"
        "    import psycopg\n"
        "    conn.exec_driver_sql(q)\n"
        "    q = 'SELECT 1'\n"
        "    r = f'''DELETE FROM {t} WHERE x'''\n"
        "    note = 'select the rows you need, then DELETE them'\n"
    )
    assert sorted(f.split(": ")[1].split()[0] for f in flagged) == [
        "SQL",
        "SQL",
        "exec_driver_sql",
        "imports",
    ]
    assert not any("sqlalchemy" in f for f in flagged)
    stores_sql = postgres_uses((PACKAGE / "stores" / "vectors.py").read_text(encoding="utf-8"))
    assert any("SQL" in f for f in stores_sql)


def test_the_allow_list_names_real_files() -> None:
    for name in GRIST_SOURCES:
        assert (PACKAGE / name).is_file(), name
