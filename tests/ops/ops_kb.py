"""A tiny knowledge base as two CSV folders (Data Model + data), as plain lists a test can edit
before writing them, plus helpers to run the real `vedana` executable and to compare reports.

The base is clean (lint finds nothing): people who live in cities (a Ref link column) and know
each other (a link table with one embeddable edge attribute).
"""

from __future__ import annotations

import copy
import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HASH_MODEL = "hash-384"  # fast, deterministic; the real model is not the point of these tests

Tables = dict[str, list[list[str]]]  # table name → rows, the first one the header

ATTR_HEADER = ["anchor", "attribute_name", "description", "data_example", "embeddable", "query", "dtype"]
LINK_ATTR_HEADER = ["link", *ATTR_HEADER[1:]]
LINKS_HEADER = [
    "anchor1",
    "anchor2",
    "sentence",
    "description",
    "query",
    "anchor1_link_column_name",
    "anchor2_link_column_name",
    "has_direction",
]

BASE_MODEL: Tables = {
    "Anchors": [
        ["noun", "description", "id_example", "query"],
        ["person", "A club member.", "p1", ""],
        ["city", "Where members live.", "lisbon", ""],
    ],
    "Anchor_attributes": [
        ATTR_HEADER,
        ["person", "person_id", "Node id.", "p1", "false", "", "str"],
        ["person", "person_name", "Full name.", "Ada Okafor", "true", "", "str"],
        ["person", "person_age", "Age in years.", "34", "false", "", "int"],
        ["city", "city_id", "Node id.", "lisbon", "false", "", "str"],
        ["city", "city_name", "City name.", "Lisbon", "true", "", "str"],
    ],
    "Links": [
        LINKS_HEADER,
        ["person", "city", "PERSON_lives_in_CITY", "Home city.", "", "person_city", "", "true"],
        ["person", "person", "PERSON_knows_PERSON", "Acquaintance.", "", "", "", "false"],
    ],
    "Link_attributes": [
        LINK_ATTR_HEADER,
        ["PERSON_knows_PERSON", "how", "How they met.", "at the chess club", "true", "", "str"],
        ["PERSON_knows_PERSON", "since", "Year they met.", "2019", "false", "", "int"],
    ],
}

BASE_DATA: Tables = {
    "Anchor_person": [
        ["person_id", "person_name", "person_age", "person_city"],
        ["p1", "Ada Okafor", "34", "lisbon"],
        ["p2", "Bo Chen", "41", "porto"],
        ["p3", "Cy Diaz", "29", "lisbon"],
    ],
    "Anchor_city": [
        ["city_id", "city_name"],
        ["lisbon", "Lisbon"],
        ["porto", "Porto"],
    ],
    "Link_person_knows_person": [
        ["from_node_id", "to_node_id", "edge_label", "how", "since"],
        ["p1", "p2", "PERSON_knows_PERSON", "met at the chess club", "2019"],
    ],
}

# What a sync of the base leaves in staging (undirected links count both ways).
BASE_NODES = {"person": 3, "city": 2}
BASE_EDGES = {"PERSON_lives_in_CITY": 3, "PERSON_knows_PERSON": 2}
BASE_VECTORS = {
    "nodes": {"person.person_name": 3, "city.city_name": 2},
    "edges": {"PERSON_knows_PERSON.how": 2},
}


class KB:
    """Editable copies of the base tables; `write(root)` puts them on disk as CSV folders."""

    def __init__(self) -> None:
        self.model: Tables = copy.deepcopy(BASE_MODEL)
        self.data: Tables = copy.deepcopy(BASE_DATA)

    def add_column(self, tables: Tables, table: str, column: str, values: list[str]) -> None:
        rows = tables[table]
        rows[0].append(column)
        for row, value in zip(rows[1:], values, strict=True):
            row.append(value)

    def set_cell(self, tables: Tables, table: str, row: int, column: str, value: str) -> None:
        """`row` counts data rows from 1."""
        tables[table][row][tables[table][0].index(column)] = value

    def write(self, root: Path) -> tuple[Path, Path]:
        model, data = root / "model", root / "data"
        for folder, tables in ((model, self.model), (data, self.data)):
            folder.mkdir(parents=True, exist_ok=True)
            for old in folder.glob("*.csv"):
                old.unlink()
            for name, rows in tables.items():
                write_csv(folder / f"{name}.csv", rows)
        return model, data


def write_csv(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def read_csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


# --- the real executable ---------------------------------------------------------------------

_CLEARED = (
    "DB_CONN_URI",
    "MEMGRAPH_URI",
    "GRIST_SERVER_URL",
    "GRIST_API_KEY",
    "GRIST_DATA_MODEL_DOC_ID",
    "GRIST_DATA_DOC_ID",
    "GRIST_TEST_SET_DOC_ID",
    "EMBEDDINGS_DIM",
    "VEDANA_DEBUG",
    "VEDANA_RAISE_ERRORS",
)


def cli_env(**extra: str) -> dict[str, str]:
    """The test session's environment (its VEDANA_HOME) with the hash embedder and no external
    services configured."""
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["EMBEDDINGS_MODEL"] = HASH_MODEL
    env.update(extra)
    return env


def vedana_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "vedana", *args]


def run_vedana(*args: str, cwd: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    """`vedana ARGS` in a child process, through the console entry point's error handling."""
    return subprocess.run(
        vedana_command(*args), cwd=cwd, env=cli_env(**env), capture_output=True, text=True, timeout=timeout
    )


# --- comparing reports --------------------------------------------------------------------------

_VOLATILE = {"run_id", "id", "started_at", "finished_at", "phase_seconds", "rows_per_s", "texts_per_s"}


def stable(value: Any) -> Any:
    """`value` without what differs between two runs on the same input: times and ids."""
    if isinstance(value, dict):
        return {
            k: stable(v) for k, v in value.items() if k not in _VOLATILE and not k.endswith(("_s", "seconds"))
        }
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value
