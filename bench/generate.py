"""Synthetic knowledge bases of any size (1k to 1M+ rows), deterministic by seed.

Two shapes, like the samples in `samples/`:
- `people`: persons, interests, cities; an undirected person–interest link table with a
  heavy-tailed number of interests per person (and skewed interest popularity) and an embeddable
  free-text `note` on up to `NOTED_LINKS_MAX` of its rows; a Ref column person → city that is a
  foreign-key link.
- `regulations`: documents, document chunks, regulations; a Ref column chunk → document, a RefList
  column regulation → chunks (the chunks whose text states the regulation's duty), a directed link
  table with edge attributes (one embeddable), a directed self-link, and one column the data model
  does not describe.

`rows` is the total number of data rows (node rows plus link-table rows) and is met exactly.
The data is clean (no duplicate ids, no dangling edges), so the expected counts in
`manifest.json` are exact.

Formats, both readable as a Grist source:
- `csv`: `model/*.csv` and `data/*.csv` in Grist's CSV export dialect; a Ref/RefList cell holds
  the referenced row's display value, which for data tables is its node id (RefList joined by ", ").
- `grist`: `model.grist` and `data.grist`, SQLite files with the user tables (`id`, `manualSort`,
  typed columns: Ref = row id with 0 for empty, RefList = JSON text `[1,3]`, Bool = 0/1,
  Date = epoch seconds) and the `_grist_Tables` / `_grist_Tables_column` metadata a reader needs
  (tableId; colId, type, isFormula, parentId, visibleCol). No display-helper columns are written.

Rows are generated lazily and written in batches, so memory stays flat at any size.

CLI: python -m bench.generate --shape people --rows 100000 --seed 1 --out /tmp/kb --format both
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, TextIO

from vedana.errors import ConfigError, VedanaError

SHAPES = ("people", "regulations")
FORMATS = ("csv", "grist", "both")
MIN_ROWS = 100
BATCH_ROWS = 5_000
MANIFEST = "manifest.json"
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()

Row = tuple[Any, ...]


# ---------------------------------------------------------------------------------------------
# Tables: typed columns plus a lazy row source
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column with its Grist type.

    Cell values by type: Text str; Int int; Numeric float; Bool bool; Date days since 1970;
    Ref row id of the target (0 = empty); RefList tuple of row ids. None is an empty cell.
    """

    name: str
    type: str = "Text"
    # Ref/RefList: the target table's column shown in Grist, and row id -> its display value.
    visible: str = ""
    display: Callable[[int], str] | None = None


@dataclass
class Table:
    name: str
    columns: list[Column]
    rows: Iterable[Row]


@dataclass
class KnowledgeBase:
    """Tables of both documents; `stats` fills in while the data rows are generated."""

    model: list[Table]
    data: list[Table]
    stats: Counter[str] = field(default_factory=Counter)


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------


class CsvFolderWriter:
    """One CSV file per table, in Grist's export dialect (minimal quoting, `\\n` line ends)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = None
        self._writer: Any = None
        self._convert: list[tuple[int, Callable[[Any], str]]] = []

    def open_table(self, table: Table) -> None:
        self._file = (self.folder / f"{table.name}.csv").open("w", encoding="utf-8", newline="")
        self._writer = csv.writer(self._file, lineterminator="\n")
        self._writer.writerow([c.name for c in table.columns])
        self._convert = [(i, f) for i, c in enumerate(table.columns) if (f := _csv_converter(c))]

    def write(self, rows: Sequence[Row]) -> None:
        if not self._convert:
            self._writer.writerows(rows)
            return
        out = []
        for row in rows:
            cells = list(row)
            for i, fn in self._convert:
                value = cells[i]
                cells[i] = "" if value is None else fn(value)
            out.append(cells)
        self._writer.writerows(out)

    def close_table(self) -> None:
        assert self._file is not None
        self._file.close()

    def close(self) -> None:
        pass


def _csv_converter(column: Column) -> Callable[[Any], str] | None:
    kind = column.type.split(":", 1)[0]
    if kind == "Bool":
        return lambda v: "true" if v else "false"
    if kind == "Date":
        return lambda v: date.fromordinal(EPOCH_ORDINAL + v).isoformat()
    if kind == "Ref":
        display = column.display
        assert display is not None
        return lambda v: display(v) if v else ""
    if kind == "RefList":
        display = column.display
        assert display is not None
        return lambda v: ", ".join(display(i) for i in v)
    return None


# SQLite column declarations as Grist writes them.
_GRIST_SQL_TYPES = {
    "Text": "TEXT DEFAULT ''",
    "Int": "INTEGER DEFAULT 0",
    "Numeric": "NUMERIC DEFAULT 0",
    "Bool": "BOOLEAN DEFAULT 0",
    "Date": "DATE DEFAULT NULL",
    "Ref": "INTEGER DEFAULT 0",
    "RefList": "TEXT DEFAULT NULL",
}
_GRIST_METADATA_DDL = (
    'CREATE TABLE "_grist_Tables" (id INTEGER PRIMARY KEY, "tableId" TEXT DEFAULT \'\', '
    '"primaryViewId" INTEGER DEFAULT 0, "summarySourceTable" INTEGER DEFAULT 0, '
    '"onDemand" BOOLEAN DEFAULT 0, "rawViewSectionRef" INTEGER DEFAULT 0, '
    '"recordCardViewSectionRef" INTEGER DEFAULT 0)',
    'CREATE TABLE "_grist_Tables_column" (id INTEGER PRIMARY KEY, "parentId" INTEGER DEFAULT 0, '
    '"parentPos" NUMERIC DEFAULT 1e999, "colId" TEXT DEFAULT \'\', "type" TEXT DEFAULT \'\', '
    '"widgetOptions" TEXT DEFAULT \'\', "isFormula" BOOLEAN DEFAULT 0, "formula" TEXT DEFAULT \'\', '
    "\"label\" TEXT DEFAULT '', \"description\" TEXT DEFAULT '', "
    '"untieColIdFromLabel" BOOLEAN DEFAULT 0, "summarySourceCol" INTEGER DEFAULT 0, '
    '"displayCol" INTEGER DEFAULT 0, "visibleCol" INTEGER DEFAULT 0, "rules" TEXT DEFAULT NULL, '
    '"reverseCol" INTEGER DEFAULT 0, "recalcWhen" INTEGER DEFAULT 0, "recalcDeps" TEXT DEFAULT NULL)',
)


class GristFileWriter:
    """A `.grist` SQLite file: user tables plus the `_grist_Tables*` metadata, written at close."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        self.path = path
        self._db = sqlite3.connect(path)
        # A generated file is rebuilt from scratch on failure, so skip the journal and fsyncs.
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        for ddl in _GRIST_METADATA_DDL:
            self._db.execute(ddl)
        self._tables: list[Table] = []
        self._insert = ""
        self._convert: list[tuple[int, Callable[[Any], Any]]] = []
        self._next_id = 1

    def open_table(self, table: Table) -> None:
        self._tables.append(table)
        columns = ", ".join(f'"{c.name}" {_GRIST_SQL_TYPES[c.type.split(":", 1)[0]]}' for c in table.columns)
        self._db.execute(
            f'CREATE TABLE "{table.name}" (id INTEGER PRIMARY KEY, '
            f'"manualSort" NUMERIC DEFAULT 1e999, {columns})'
        )
        marks = ", ".join("?" * (len(table.columns) + 2))
        self._insert = f'INSERT INTO "{table.name}" VALUES ({marks})'
        self._convert = [(i, f) for i, c in enumerate(table.columns) if (f := _grist_converter(c))]
        self._next_id = 1

    def write(self, rows: Sequence[Row]) -> None:
        first = self._next_id
        self._next_id += len(rows)
        if not self._convert:
            records: Iterable[Row] = ((n, n, *row) for n, row in enumerate(rows, start=first))
        else:
            records = (self._converted(n, row) for n, row in enumerate(rows, start=first))
        self._db.executemany(self._insert, records)

    def _converted(self, row_id: int, row: Row) -> Row:
        cells = list(row)
        for i, fn in self._convert:
            if cells[i] is not None:
                cells[i] = fn(cells[i])
        return (row_id, row_id, *cells)

    def close_table(self) -> None:
        pass

    def close(self) -> None:
        """Describe every table in `_grist_Tables` / `_grist_Tables_column`, as Grist does."""
        col_ids: dict[tuple[str, str], int] = {}
        next_col = 1
        for table in self._tables:
            for name in ["manualSort", *(c.name for c in table.columns)]:
                col_ids[(table.name, name)] = next_col
                next_col += 1
        tables, columns = [], []
        for table_id, table in enumerate(self._tables, start=1):
            tables.append((table_id, table.name))
            columns.append((col_ids[(table.name, "manualSort")], table_id, "manualSort", "ManualSortPos", 0))
            for c in table.columns:
                visible = 0
                if c.type.startswith(("Ref:", "RefList:")):
                    visible = col_ids.get((c.type.split(":", 1)[1], c.visible), 0)
                columns.append((col_ids[(table.name, c.name)], table_id, c.name, c.type, visible))
        self._db.executemany('INSERT INTO "_grist_Tables" (id, "tableId") VALUES (?, ?)', tables)
        self._db.executemany(
            'INSERT INTO "_grist_Tables_column" (id, "parentId", "parentPos", "colId", "type", '
            '"isFormula", "label", "visibleCol") VALUES (?1, ?2, ?1, ?3, ?4, 0, ?3, ?5)',
            columns,
        )
        self._db.commit()
        self._db.close()


def _grist_converter(column: Column) -> Callable[[Any], Any] | None:
    kind = column.type.split(":", 1)[0]
    if kind == "Bool":
        return int
    if kind == "Date":
        return lambda days: days * 86_400  # Grist stores a Date as epoch seconds
    if kind == "RefList":
        return lambda v: "[" + ",".join(map(str, v)) + "]" if v else None
    return None


Writer = CsvFolderWriter | GristFileWriter


def write_tables(tables: list[Table], writers: list[Writer]) -> dict[str, int]:
    """Stream every table's rows to every writer in batches; return rows written per table."""
    counts: dict[str, int] = {}
    for table in tables:
        for w in writers:
            w.open_table(table)
        rows = iter(table.rows)
        n = 0
        while batch := list(islice(rows, BATCH_ROWS)):
            for w in writers:
                w.write(batch)
            n += len(batch)
        for w in writers:
            w.close_table()
        counts[table.name] = n
    for w in writers:
        w.close()
    return counts


# ---------------------------------------------------------------------------------------------
# Random helpers
# ---------------------------------------------------------------------------------------------


def table_rng(seed: int, table: str) -> random.Random:
    """An independent stream per table, so adding a column to one table leaves the others alone."""
    return random.Random(f"{seed}:{table}")


def heavy_tailed_counts(rng: random.Random, total: int, buckets: int, cap: int) -> Iterator[int]:
    """`buckets` Pareto-distributed counts in [0, cap] that add up to exactly `total`.

    Each draw is centred on the running mean (what is left / buckets left) and clamped so the
    remaining buckets can still absorb the rest.
    """
    if total > buckets * cap:
        raise ConfigError(f"cannot spread {total} rows over {buckets} groups of at most {cap}; use more rows")
    alpha = 1.4
    remaining = total
    for left in range(buckets, 0, -1):
        scale = remaining / left * (alpha - 1) / alpha
        draw = int(scale / (1.0 - rng.random()) ** (1 / alpha) + 0.5)
        k = min(cap, remaining, max(remaining - (left - 1) * cap, draw))
        remaining -= k
        yield k


def distinct_skewed(rng: random.Random, k: int, n: int, skew: float) -> list[int]:
    """`k` distinct indices in [0, n), low indices much more likely (popular items)."""
    picked: set[int] = set()
    out = []
    for _ in range(min(k, n)):
        i = int(n * rng.random() ** skew)
        while i in picked:
            i = (i + 1) % n
        picked.add(i)
        out.append(i)
    return out


def id_formatter(prefix: str, count: int) -> Callable[[int], str]:
    """Row id (1-based) -> node id like `person:000042`, zero-padded to the table's size."""
    pattern = f"{prefix}:%0{max(4, len(str(count)))}d"
    return lambda row_id: pattern % row_id


@lru_cache(maxsize=64)
def coprime_step(size: int) -> int:
    """A multiplier that permutes range(size) (a prime that does not divide it)."""
    return next(p for p in (7919, 7927, 7933, 7937) if math.gcd(p, size) == 1)


def spread(index: int, size: int) -> int:
    """A fixed permutation of range(size), so neighbouring rows get unrelated words."""
    return (index * coprime_step(size)) % size


def cycled_name(index: int, bases: Sequence[str]) -> str:
    """The index-th name: every base once, then again with a round number."""
    base = bases[spread(index % len(bases), len(bases))]
    rounds = index // len(bases)
    return base if rounds == 0 else f"{base} {rounds + 1}"


# ---------------------------------------------------------------------------------------------
# Data model tables (the Data Model document)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttrSpec:
    name: str
    dtype: str = "str"
    embeddable: bool = False
    description: str = ""
    example: str = ""


@dataclass(frozen=True)
class AnchorSpec:
    noun: str
    description: str
    id_example: str
    attributes: tuple[AttrSpec, ...]


@dataclass(frozen=True)
class LinkSpec:
    sentence: str
    anchor1: str
    anchor2: str
    description: str
    has_direction: bool
    anchor1_link_column: str = ""
    attributes: tuple[AttrSpec, ...] = ()


def model_tables(
    anchors: list[AnchorSpec], links: list[LinkSpec], queries: list[tuple[str, str]], no_answer: str
) -> list[Table]:
    nouns = [a.noun for a in anchors]
    sentences = [lk.sentence for lk in links]
    noun_row = {noun: i for i, noun in enumerate(nouns, start=1)}
    attr_columns = [
        Column("attribute_name"),
        Column("description"),
        Column("data_example"),
        Column("embeddable", "Bool"),
        Column("query"),
        Column("dtype"),
        Column("embed_threshold", "Numeric"),
        Column("embed_top_n", "Int"),
    ]

    def attr_cells(a: AttrSpec) -> Row:
        threshold, top_n = (0.5, 10) if a.embeddable else (None, None)
        return (a.name, a.description, a.example, a.embeddable, "", a.dtype, threshold, top_n)

    return [
        Table(
            "Anchors",
            [Column("noun"), Column("description"), Column("id_example"), Column("query")],
            [(a.noun, a.description, a.id_example, f"MATCH (n:{a.noun}) RETURN n LIMIT 5") for a in anchors],
        ),
        Table(
            "Anchor_attributes",
            [Column("anchor", "Ref:Anchors", "noun", lambda i: nouns[i - 1]), *attr_columns],
            [(noun_row[a.noun], *attr_cells(at)) for a in anchors for at in a.attributes],
        ),
        Table(
            "Links",
            [
                Column("anchor1", "Ref:Anchors", "noun", lambda i: nouns[i - 1]),
                Column("anchor2", "Ref:Anchors", "noun", lambda i: nouns[i - 1]),
                Column("sentence"),
                Column("description"),
                Column("query"),
                Column("anchor1_link_column_name"),
                Column("anchor2_link_column_name"),
                Column("has_direction", "Bool"),
            ],
            [
                (
                    noun_row[lk.anchor1],
                    noun_row[lk.anchor2],
                    lk.sentence,
                    lk.description,
                    f"MATCH (a:{lk.anchor1})-[r:{lk.sentence}]->(b:{lk.anchor2}) RETURN a.id, b.id LIMIT 5",
                    lk.anchor1_link_column,
                    "",
                    lk.has_direction,
                )
                for lk in links
            ],
        ),
        Table(
            "Link_attributes",
            [Column("link", "Ref:Links", "sentence", lambda i: sentences[i - 1]), *attr_columns],
            [(i, *attr_cells(at)) for i, lk in enumerate(links, start=1) for at in lk.attributes],
        ),
        Table("Queries", [Column("query_name"), Column("query_example")], list(queries)),
        Table("Prompts", [Column("name"), Column("text")], [("no_answer", no_answer)]),
    ]


# ---------------------------------------------------------------------------------------------
# Vocabulary (written for this generator)
# ---------------------------------------------------------------------------------------------

FIRST_NAMES = (
    "Ada", "Aiko", "Amara", "Anders", "Aroha", "Bea", "Bongani", "Camila", "Chidi", "Dario", "Elif",
    "Emeka", "Farid", "Freya", "Greta", "Hamid", "Ines", "Ivo", "Jalen", "Kaia", "Kenji", "Kofi",
    "Leon", "Liv", "Lucia", "Malik", "Mateo", "Mei", "Nadia", "Noor", "Oona", "Pablo", "Priya",
    "Rafael", "Rosa", "Sanna", "Soren", "Thandi", "Uma", "Wren", "Yara", "Yusuf", "Zofia",
)  # fmt: skip
LAST_NAMES = (
    "Abara", "Alvarez", "Bakshi", "Bianchi", "Brennan", "Chowdhury", "Dahl", "Demir", "Eze", "Falk",
    "Fujita", "Haddad", "Ibarra", "Jansen", "Kamau", "Kowalski", "Laine", "Moreau", "Murata",
    "Novak", "Okafor", "Park", "Petrov", "Quispe", "Rahman", "Rossi", "Sato", "Silva", "Tanaka",
    "Torres", "Varga", "Vidal", "Weiss", "Yilmaz", "Zamora",
)  # fmt: skip
CITY_PARTS = (
    ("North", "South", "East", "West", "Ash", "Oak", "Stone", "River", "Salt", "Iron", "Elm",
     "Fair", "Green", "Red", "Silver", "Wolf", "Bright", "Cold", "High", "Long"),
    ("bridge", "ford", "haven", "field", "port", "wick", "stead", "mouth", "dale", "burgh",
     "moor", "cliff", "brook", "gate", "ton", "wood", "holm", "by", "minster", "well"),
)  # fmt: skip
COUNTRIES = ("Avalonia", "Borduria", "Carpathia", "Dalmara", "Estovia", "Florin", "Genovia", "Hyrkania")
INTEREST_SUBJECTS = (
    ("sourdough baking", "food and drink"), ("kimchi making", "food and drink"),
    ("street food", "food and drink"), ("coffee roasting", "food and drink"),
    ("cheese tasting", "food and drink"), ("tea ceremonies", "food and drink"),
    ("quokkas", "animals"), ("axolotls", "animals"), ("otters", "animals"), ("owls", "animals"),
    ("octopuses", "animals"), ("honeybees", "animals"), ("red pandas", "animals"),
    ("medieval history", "history"), ("roman architecture", "history"), ("viking sagas", "history"),
    ("art deco design", "history"), ("old maps", "history"), ("ancient coins", "history"),
    ("pottery", "crafts"), ("woodworking", "crafts"), ("knitting", "crafts"),
    ("bookbinding", "crafts"), ("calligraphy", "crafts"), ("stained glass", "crafts"),
    ("bouldering", "sports"), ("trail running", "sports"), ("table tennis", "sports"),
    ("fencing", "sports"), ("rowing", "sports"), ("sailing", "sports"), ("judo", "sports"),
    ("astronomy", "science"), ("mycology", "science"), ("geology", "science"),
    ("botany", "science"), ("linguistics", "science"), ("robotics", "science"),
    ("jazz", "music"), ("flamenco", "music"), ("synthwave", "music"), ("opera", "music"),
    ("playing the cello", "music"), ("playing the banjo", "music"), ("sea shanties", "music"),
    ("chess", "games"), ("go", "games"), ("crossword puzzles", "games"),
    ("tabletop role-playing games", "games"), ("speedrunning", "games"), ("mahjong", "games"),
    ("birdwatching", "outdoors"), ("stargazing", "outdoors"), ("foraging", "outdoors"),
    ("beekeeping", "outdoors"), ("bonsai", "outdoors"), ("fly fishing", "outdoors"),
)  # fmt: skip
INTEREST_MODIFIERS = (
    "", "amateur", "competitive", "vintage", "urban", "japanese", "nordic", "experimental",
    "traditional", "modern", "historical", "outdoor", "miniature", "family", "weekend", "online",
    "regional", "classical", "slow", "collaborative",
)  # fmt: skip
INTEREST_NAMES = tuple(f"{m} {s}".strip() for m in INTEREST_MODIFIERS for s, _ in INTEREST_SUBJECTS)
INTEREST_CATEGORIES = tuple(c for _ in INTEREST_MODIFIERS for _, c in INTEREST_SUBJECTS)
SKILL_LEVELS = ("curious", "beginner", "beginner", "intermediate", "intermediate", "expert")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")  # fmt: skip
NOTE_ORIGINS = (
    "after a friend's invitation", "at a community evening class", "from a library book",
    "on a holiday abroad", "through a colleague", "from online videos", "at a summer festival",
    "with their children", "after moving house", "during a long winter",
)  # fmt: skip
NOTE_HABITS = (
    "practises weekly", "goes at it most weekends", "keeps at it a few times a year",
    "meets a local group monthly", "spends most evenings on it", "has lately let it slide",
)  # fmt: skip

TOPICS = (
    "cold storage", "allergen labelling", "fire safety", "hand hygiene", "pest control",
    "waste disposal", "working at height", "noise exposure", "chemical storage", "first aid",
    "water quality", "manual handling", "electrical safety", "lone working", "ventilation",
)  # fmt: skip
DUTY_VERBS = (
    "inspect", "log the condition of", "clean", "label", "test", "replace", "lock away",
    "calibrate", "document checks of", "train staff to use", "keep spare", "report faults in",
)  # fmt: skip
DUTY_OBJECTS = (
    "refrigerators", "fire doors", "ladders", "first-aid kits", "hand-wash basins", "bait stations",
    "waste bins", "extractor fans", "chemical cabinets", "eyewash stations", "water tanks",
    "delivery trolleys", "ear defenders", "thermometers", "emergency lights", "gas valves",
    "guard rails", "shower heads", "smoke alarms", "allergen labels",
)  # fmt: skip
DUTY_FREQUENCIES = (
    "every day", "every week", "every month", "every quarter", "once a year", "after each use",
    "before each shift", "after any incident",
)  # fmt: skip
DOC_KINDS = ("handbook", "inspection checklist", "compliance guide")
PUBLISHERS = ("Food Standards Office", "Workplace Safety Agency", "Environment Agency", "Fire Authority")
CHUNK_OPENERS = (
    "Every employer must", "Site managers must", "Supervisors are required to", "Check that staff",
    "Confirm that the site is able to", "To comply, businesses must", "Contractors on site must",
    "Small businesses are expected to",
)  # fmt: skip
CHUNK_TAILS = (
    ".", " and keep a written record.", "; inspectors may ask to see evidence.",
    " unless a written exemption is held.", ", as the worked example shows.",
)  # fmt: skip
CHUNK_FILLERS = (
    "This {kind} explains how the {topic} rules apply to small businesses.",
    "The following pages summarise what an inspector looks for in {topic}.",
    "Terms used in this {kind} are defined in the glossary.",
    "Case study: a bakery that improved its {topic} rating within three months.",
)  # fmt: skip
COVERAGE = (
    ("full", "Explains the duty to {duty} step by step, with a worked example."),
    ("full", "Dedicates a section to the duty to {duty}, including common mistakes."),
    ("partial", "Covers the duty to {duty} in a short paragraph."),
    ("partial", "Discusses the duty to {duty} alongside related duties."),
    ("mention", "Mentions the duty to {duty} once, in passing."),
)  # fmt: skip


def duty(reg_index: int) -> str:
    """The duty a regulation imposes, a pure function of its index."""
    v, o, f = len(DUTY_VERBS), len(DUTY_OBJECTS), len(DUTY_FREQUENCIES)
    n = spread(reg_index, v * o * f)
    return f"{DUTY_VERBS[n % v]} {DUTY_OBJECTS[(n // v) % o]} {DUTY_FREQUENCIES[(n // (v * o)) % f]}"


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


# ---------------------------------------------------------------------------------------------
# Shape: people
# ---------------------------------------------------------------------------------------------

PEOPLE_ANCHORS = [
    AnchorSpec("person", "A member of the club.", "person:0001", (
        AttrSpec("person_id", description="Node id."),
        AttrSpec("person_name", embeddable=True, description="Full name.", example="Ada Okafor"),
        AttrSpec("person_age", "int", description="Age in years.", example="34"),
        AttrSpec("person_joined", "date", description="Date joined.", example="2019-04-12"),
        AttrSpec("person_is_mentor", "bool", description="Mentors newcomers.", example="true"),
    )),
    AnchorSpec("interest", "A hobby or topic.", "interest:0001", (
        AttrSpec("interest_id", description="Node id."),
        AttrSpec("interest_name", embeddable=True, description="Name.", example="sourdough baking"),
        AttrSpec("interest_category", description="Family of the interest.", example="food and drink"),
    )),
    AnchorSpec("city", "A city people live in.", "city:0001", (
        AttrSpec("city_id", description="Node id."),
        AttrSpec("city_name", embeddable=True, description="City name.", example="Northbridge"),
        AttrSpec("city_country", description="Country.", example="Florin"),
    )),
]  # fmt: skip
PEOPLE_LINKS = [
    LinkSpec("PERSON_has_INTEREST", "person", "interest", "The person enjoys the interest (undirected).",
             False, attributes=(AttrSpec("skill_level", example="beginner"),
                                AttrSpec("since_year", "int", example="2017"),
                                AttrSpec("note", embeddable=True, description="How the person took it up.",
                                         example="Took up pottery in May 2017 from a library book; "
                                                 "practises weekly, now beginner."))),
    LinkSpec("PERSON_lives_in_CITY", "person", "city", "Where the person lives (person_city column).",
             True, anchor1_link_column="person_city"),
]  # fmt: skip
PEOPLE_QUERIES = [
    ("Who is interested in <interest>?",
     "1) vector_text_search(label=\"interest\", property=\"interest_name\", text=\"<interest>\").\n"
     "2) MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {id: $id}) RETURN p.person_name"),
    ("Which interests are most popular?",
     "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest) "
     "RETURN i.interest_name, count(p) AS people ORDER BY people DESC LIMIT 10"),
]  # fmt: skip


# Link rows that carry a note. An undirected link stores each row in both directions, so a noted
# row is two edge vectors: 50,000 notes make the edge index 100,000 vectors from 100k rows up (the
# size at which issue 13 wants search latency), while at 1M rows that index stays small enough to
# build in memory (≈ 1.6M vectors if every row had a note).
NOTED_LINKS_MAX = 50_000


def people(rows: int, seed: int) -> KnowledgeBase:
    n_city = max(3, rows // 500)
    n_interest = max(10, rows // 20)
    n_person = max(5, rows * 15 // 100)
    n_link = rows - n_city - n_interest - n_person
    max_degree = min(n_interest, 300)
    if n_link < 0 or n_link > n_person * max_degree:
        raise ConfigError(f"--rows {rows} is too small for the people shape; use at least {MIN_ROWS}")
    n_noted = min(n_link, NOTED_LINKS_MAX)
    stats: Counter[str] = Counter()
    city_id = id_formatter("city", n_city)
    interest_id = id_formatter("interest", n_interest)
    person_id = id_formatter("person", n_person)
    city_names = tuple(f"{a}{b}" for a in CITY_PARTS[0] for b in CITY_PARTS[1])

    def cities() -> Iterator[Row]:
        rng = table_rng(seed, "city")
        for i in range(n_city):
            yield (city_id(i + 1), cycled_name(i, city_names), rng.choice(COUNTRIES))

    def interests() -> Iterator[Row]:
        for i in range(n_interest):
            base = spread(i % len(INTEREST_NAMES), len(INTEREST_NAMES))
            yield (interest_id(i + 1), cycled_name(i, INTEREST_NAMES), INTEREST_CATEGORIES[base])

    def persons() -> Iterator[Row]:
        rng = table_rng(seed, "person")
        joined_from = date(2012, 1, 1).toordinal() - EPOCH_ORDINAL
        for i in range(1, n_person + 1):
            name = (
                f"{rng.choice(FIRST_NAMES)} {rng.choice('ABCDEFGHIJKLMNOPRSTVW')}. {rng.choice(LAST_NAMES)}"
            )
            city = 0 if rng.random() < 0.05 else rng.randrange(n_city) + 1
            stats["edges.PERSON_lives_in_CITY"] += city > 0
            yield (person_id(i), name, rng.randint(18, 80), joined_from + rng.randrange(4000), city,
                   rng.random() < 0.2)  # fmt: skip

    def person_interests() -> Iterator[Row]:
        rng = table_rng(seed, "person_interest")
        note_rng = table_rng(seed, "person_interest_note")  # its own stream: other columns stay as they were
        degrees = heavy_tailed_counts(rng, n_link, n_person, max_degree)
        j = 0
        for i, k in enumerate(degrees, start=1):
            pid = person_id(i)
            for pick in distinct_skewed(rng, k, n_interest, skew=2.5):
                skill, year = rng.choice(SKILL_LEVELS), rng.randint(1995, 2024)
                note = ""
                if (
                    j + 1
                ) * n_noted // n_link != j * n_noted // n_link:  # exactly n_noted rows, evenly spread
                    note = (
                        f"Took up {cycled_name(pick, INTEREST_NAMES)} in {note_rng.choice(MONTHS)} {year} "
                        f"{note_rng.choice(NOTE_ORIGINS)}; {note_rng.choice(NOTE_HABITS)}, now {skill}."
                    )
                    stats["values.PERSON_has_INTEREST.note"] += 2  # stored in both directions
                j += 1
                yield (pid, interest_id(pick + 1), "PERSON_has_INTEREST", skill, year, note)  # fmt: skip

    return KnowledgeBase(
        model=model_tables(PEOPLE_ANCHORS, PEOPLE_LINKS, PEOPLE_QUERIES,
                           "Nobody in the directory matches; try naming a person, an interest or a city."),
        data=[
            Table("Anchor_city", [Column("city_id"), Column("city_name"), Column("city_country")], cities()),
            Table("Anchor_interest",
                  [Column("interest_id"), Column("interest_name"), Column("interest_category")], interests()),
            Table("Anchor_person", [
                Column("person_id"), Column("person_name"), Column("person_age", "Int"),
                Column("person_joined", "Date"),
                Column("person_city", "Ref:Anchor_city", "city_id", city_id),
                Column("person_is_mentor", "Bool"),
            ], persons()),
            Table("Link_person_has_interest", [
                Column("from_node_id"), Column("to_node_id"), Column("edge_label"), Column("skill_level"),
                Column("since_year", "Int"), Column("note"),
            ], person_interests()),
        ],
        stats=stats,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Shape: regulations
# ---------------------------------------------------------------------------------------------

REGULATIONS_ANCHORS = [
    AnchorSpec("document", "A published guidance document.", "doc:0001", (
        AttrSpec("document_id", description="Node id."),
        AttrSpec("document_title", embeddable=True, description="Title.", example="Fire safety handbook"),
        AttrSpec("document_kind", description="handbook, inspection checklist or compliance guide."),
        AttrSpec("document_year", "int", description="Year of publication.", example="2021"),
        AttrSpec("document_publisher", description="Publishing agency."),
    )),
    AnchorSpec("document_chunk", "A paragraph of a document.", "chunk:0001", (
        AttrSpec("document_chunk_id", description="Node id."),
        AttrSpec("document_chunk_text", embeddable=True, description="The paragraph's text."),
        AttrSpec("document_chunk_position", "int", description="Paragraph number in the document."),
    )),
    AnchorSpec("regulation", "A legal duty.", "reg:0001", (
        AttrSpec("regulation_id", description="Node id."),
        AttrSpec("regulation_title", embeddable=True, description="Topic and duty."),
        AttrSpec("regulation_effective_date", "date", description="In force since."),
        AttrSpec("regulation_is_binding", "bool", description="false for good practice."),
        AttrSpec("regulation_max_fine_eur", "float", description="Highest fine in euros."),
    )),
]  # fmt: skip
REGULATIONS_LINKS = [
    LinkSpec("DOCUMENT_CHUNK_part_of_DOCUMENT", "document_chunk", "document",
             "The paragraph belongs to the document (document_chunk_document column).", True,
             anchor1_link_column="document_chunk_document"),
    LinkSpec("REGULATION_has_DOCUMENT_CHUNK", "regulation", "document_chunk",
             "The paragraph states the regulation (regulation_document_chunks column); undirected.", False,
             anchor1_link_column="regulation_document_chunks"),
    LinkSpec("DOCUMENT_covers_REGULATION", "document", "regulation", "How a document covers a regulation.",
             True, attributes=(
                 AttrSpec("coverage", embeddable=True, description="How the document covers it."),
                 AttrSpec("coverage_level", description="full, partial or mention."),
                 AttrSpec("section_count", "int"),
                 AttrSpec("verified", "bool"),
             )),
    LinkSpec("REGULATION_amends_REGULATION", "regulation", "regulation", "The first amends the second.", True),
]  # fmt: skip
REGULATIONS_QUERIES = [
    ("Which documents cover <duty>?",
     "1) vector_text_search(label=\"regulation\", property=\"regulation_title\", text=\"<duty>\").\n"
     "2) MATCH (d:document)-[c:DOCUMENT_covers_REGULATION]->(r:regulation {id: $id}) "
     "RETURN d.document_title, c.coverage"),
    ("Which paragraphs state regulation <id>?",
     "MATCH (r:regulation {id: $id})-[:REGULATION_has_DOCUMENT_CHUNK]-(c:document_chunk) "
     "RETURN c.document_chunk_text"),
]  # fmt: skip


MAX_COVERS_PER_DOC = 500


def regulations(rows: int, seed: int) -> KnowledgeBase:
    n_doc = max(5, rows // 50)
    n_reg = max(8, rows * 8 // 100)
    n_cover = rows // 4
    n_amend = max(1, rows // 100)
    n_chunk = rows - n_doc - n_reg - n_cover - n_amend
    if n_chunk < n_doc or n_cover > n_doc * min(n_reg, MAX_COVERS_PER_DOC) or n_amend > n_reg:
        raise ConfigError(f"--rows {rows} is too small for the regulations shape; use at least {MIN_ROWS}")
    stats: Counter[str] = Counter()
    doc_id = id_formatter("doc", n_doc)
    chunk_id = id_formatter("chunk", n_chunk)
    reg_id = id_formatter("reg", n_reg)
    # Chunk c (0-based) states the duty of regulation (c * step) mod n_reg; inverting that lets a
    # regulation list its chunks without holding a chunk -> regulation map in memory.
    step = coprime_step(n_reg)
    inverse = pow(step, -1, n_reg)
    salt = table_rng(seed, "filler").randrange(1 << 30)

    def is_filler(c: int) -> bool:
        return ((c ^ salt) * 2654435761 >> 7) % 5 == 0

    def documents() -> Iterator[Row]:
        rng = table_rng(seed, "document")
        for d in range(n_doc):
            topic, kind = TOPICS[d % len(TOPICS)], DOC_KINDS[(d // len(TOPICS)) % len(DOC_KINDS)]
            volume = d // (len(TOPICS) * len(DOC_KINDS))
            title = f"{capitalised(topic)} {kind}" + (f", volume {volume + 1}" if volume else "")
            note = "scanned copy, check page order" if rng.random() < 0.1 else ""
            yield (doc_id(d + 1), title, kind, rng.randint(2010, 2024), rng.choice(PUBLISHERS), note)

    def chunks() -> Iterator[Row]:
        rng = table_rng(seed, "document_chunk")
        sizes = heavy_tailed_counts(rng, n_chunk, n_doc, max(50, 20 * math.ceil(n_chunk / n_doc)))
        c = 0
        for d, size in enumerate(sizes):
            topic, kind = TOPICS[d % len(TOPICS)], DOC_KINDS[(d // len(TOPICS)) % len(DOC_KINDS)]
            for position in range(1, size + 1):
                if is_filler(c):
                    text = rng.choice(CHUNK_FILLERS).format(kind=kind, topic=topic)
                else:
                    text = f"{rng.choice(CHUNK_OPENERS)} {duty(c * step % n_reg)}{rng.choice(CHUNK_TAILS)}"
                stats["edges.DOCUMENT_CHUNK_part_of_DOCUMENT"] += 1
                c += 1
                yield (chunk_id(c), text, position, d + 1)

    def regulation_rows() -> Iterator[Row]:
        rng = table_rng(seed, "regulation")
        start = date(2008, 1, 1).toordinal() - EPOCH_ORDINAL
        for r in range(n_reg):
            first = r * inverse % n_reg
            limit = min(50, int(2 / (1.0 - rng.random()) ** (1 / 1.4)))
            stated = tuple(c + 1 for c in islice(
                (c for c in range(first, n_chunk, n_reg) if not is_filler(c)), limit))  # fmt: skip
            stats["edges.REGULATION_has_DOCUMENT_CHUNK"] += 2 * len(stated)
            yield (reg_id(r + 1), f"{capitalised(TOPICS[r % len(TOPICS)])}: {duty(r)}",
                   start + rng.randrange(6000), rng.random() < 0.8,
                   float(rng.choice((250, 500, 1000, 2500, 5000, 10000))), stated)  # fmt: skip

    def covers() -> Iterator[Row]:
        rng = table_rng(seed, "document_covers_regulation")
        degrees = heavy_tailed_counts(rng, n_cover, n_doc, min(n_reg, MAX_COVERS_PER_DOC))
        for d, k in enumerate(degrees, start=1):
            for r in distinct_skewed(rng, k, n_reg, skew=1.5):
                level, text = rng.choice(COVERAGE)
                yield (doc_id(d), reg_id(r + 1), "DOCUMENT_covers_REGULATION", text.format(duty=duty(r)),
                       level, rng.randint(1, 6), rng.random() < 0.7)  # fmt: skip

    def amends() -> Iterator[Row]:
        rng = table_rng(seed, "regulation_amends_regulation")
        for t in range(n_amend):
            newer = spread(t, n_reg)
            older = (newer + 1 + rng.randrange(n_reg - 1)) % n_reg
            yield (reg_id(newer + 1), reg_id(older + 1), "REGULATION_amends_REGULATION")

    return KnowledgeBase(
        model=model_tables(REGULATIONS_ANCHORS, REGULATIONS_LINKS, REGULATIONS_QUERIES,
                           "No matching regulation or document; try quoting a duty or a regulation id."),
        data=[
            Table("Anchor_document", [
                Column("document_id"), Column("document_title"), Column("document_kind"),
                Column("document_year", "Int"), Column("document_publisher"),
                Column("document_internal_note"),  # not described in the data model: sync drops it
            ], documents()),
            Table("Anchor_document_chunk", [
                Column("document_chunk_id"), Column("document_chunk_text"),
                Column("document_chunk_position", "Int"),
                Column("document_chunk_document", "Ref:Anchor_document", "document_id", doc_id),
            ], chunks()),
            Table("Anchor_regulation", [
                Column("regulation_id"), Column("regulation_title"),
                Column("regulation_effective_date", "Date"), Column("regulation_is_binding", "Bool"),
                Column("regulation_max_fine_eur", "Numeric"),
                Column("regulation_document_chunks", "RefList:Anchor_document_chunk", "document_chunk_id",
                       chunk_id),
            ], regulation_rows()),
            Table("Link_document_covers_regulation", [
                Column("from_node_id"), Column("to_node_id"), Column("edge_label"), Column("coverage"),
                Column("coverage_level"), Column("section_count", "Int"), Column("verified", "Bool"),
            ], covers()),
            Table("Link_regulation_amends_regulation",
                  [Column("from_node_id"), Column("to_node_id"), Column("edge_label")], amends()),
        ],
        stats=stats,
    )  # fmt: skip


BUILDERS: dict[str, Callable[[int, int], KnowledgeBase]] = {"people": people, "regulations": regulations}


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def expected_counts(kb: KnowledgeBase, rows: dict[str, int]) -> dict[str, Any]:
    """What a sync of the generated data must produce (the data is clean, so these are exact)."""
    model = {t.name: t for t in kb.model}
    nouns = [r[0] for r in model["Anchors"].rows]
    links = list(model["Links"].rows)
    edges: dict[str, int] = {}
    for link in links:
        sentence, has_direction, column = link[2], link[7], link[5]
        if column:
            edges[sentence] = kb.stats[f"edges.{sentence}"]
        else:
            table_rows = rows[f"Link_{sentence.lower()}"]
            edges[sentence] = table_rows if has_direction else 2 * table_rows
    embeddable = [(nouns[r[0] - 1], r[1]) for r in model["Anchor_attributes"].rows if r[4]]
    sentences = [lk[2] for lk in links]
    embeddable += [(sentences[r[0] - 1], r[1]) for r in model["Link_attributes"].rows if r[4]]
    return {
        "nodes": {noun: rows[f"Anchor_{noun}"] for noun in nouns},
        "edges": edges,
        # Values (= vectors) per embeddable attribute: one per row, unless the generator counted
        # them because only some rows have one.
        "embeddable_values": {
            f"{owner}.{name}": kb.stats.get(
                f"values.{owner}.{name}", rows[f"Anchor_{owner}"] if owner in nouns else edges[owner]
            )
            for owner, name in embeddable
        },
    }


def generate(shape: str, rows: int, seed: int, out: Path, fmt: str = "csv") -> dict[str, Any]:
    """Write a `shape` knowledge base of `rows` data rows into `out`; return (and save) its manifest."""
    if shape not in BUILDERS:
        raise ConfigError(f"unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if rows < MIN_ROWS:
        raise ConfigError(f"--rows must be at least {MIN_ROWS}")
    _prepare_out(out)
    kb = BUILDERS[shape](rows, seed)

    files: list[str] = []
    model_writers: list[Writer] = []
    data_writers: list[Writer] = []
    if fmt in ("csv", "both"):
        model_writers.append(CsvFolderWriter(out / "model"))
        data_writers.append(CsvFolderWriter(out / "data"))
        files += [f"model/{t.name}.csv" for t in kb.model] + [f"data/{t.name}.csv" for t in kb.data]
    if fmt in ("grist", "both"):
        model_writers.append(GristFileWriter(out / "model.grist"))
        data_writers.append(GristFileWriter(out / "data.grist"))
        files += ["model.grist", "data.grist"]

    write_tables(kb.model, model_writers)
    table_rows = write_tables(kb.data, data_writers)
    manifest = {
        "shape": shape,
        "seed": seed,
        "rows": sum(table_rows.values()),
        "format": fmt,
        "tables": table_rows,
        "expected": expected_counts(kb, table_rows),
        "files": files,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _prepare_out(out: Path) -> None:
    """Remove what an earlier run wrote here; refuse a folder holding anything else of that kind."""
    manifest = out / MANIFEST
    if manifest.exists():
        for rel in json.loads(manifest.read_text(encoding="utf-8")).get("files", []):
            (out / rel).unlink(missing_ok=True)
        manifest.unlink()
    clashes = [p for p in (out / "model", out / "data") if p.is_dir() and any(p.iterdir())]
    clashes += [p for p in (out / "model.grist", out / "data.grist") if p.exists()]
    if clashes:
        raise ConfigError(f"{clashes[0]} exists and was not written by this generator; choose an empty --out")
    out.mkdir(parents=True, exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.generate",
        description="Write a synthetic knowledge base (Grist-style CSV folder and/or .grist files).",
    )
    parser.add_argument("--shape", choices=SHAPES, default="people")
    parser.add_argument("--rows", type=int, default=10_000, help="total data rows (nodes + link rows)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--format", choices=FORMATS, default="csv", dest="fmt")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        manifest = generate(args.shape, args.rows, args.seed, args.out, args.fmt)
    except VedanaError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    elapsed = time.perf_counter() - started
    print(
        f"wrote {manifest['rows']:,} {args.shape} rows as {args.fmt} to {args.out} in {elapsed:.2f} s "
        f"({manifest['rows'] / elapsed:,.0f} rows/s)",
        file=sys.stderr,
    )
    print(json.dumps(manifest["expected"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
