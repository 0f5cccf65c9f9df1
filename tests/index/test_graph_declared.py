"""A full rebuild that types groups by the data model's dtypes (`rebuild_graph(dm=...)`) builds
the graph the `UNWIND` load and the Python encoder build, for staging written by a real sync of
a CSV folder (or Grist): every dtype and alias, columns the model declares but the source lacks,
undirected and directed links, self-loops, foreign-key edges, an incremental re-sync, a model
change by a data sync or by a `--data-model-only` one (rows cast by the old model: not typed)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from test_graph_records import snapshot

from standins.fake_grist import FakeGrist
from standins.grist_files import build_grist_file
from support.index_kb import scratch_graphs
from support.staging_rows import reset_staging
from support.sync_kb import API_KEY, blank_staging, club_data, club_model, grist_settings
from vedana.config import Settings
from vedana.embeddings.hashing import HashEmbedder
from vedana.etl.graph_load import load_graph, rebuild_graph
from vedana.etl.index import index
from vedana.etl.sync import sync
from vedana.stores import staging_bulk
from vedana.stores.graph import GraphStore
from vedana.stores.graph_falkordb import FalkorGraph
from vedana.stores.index_state import staging_version
from vedana.stores.staging import load_data_model
from vedana.stores.staging_changes import VersionRange

LINK_COLUMNS = [
    "anchor1",
    "anchor2",
    "sentence",
    "description",
    "anchor1_link_column_name",
    "anchor2_link_column_name",
    "has_direction",
]

# noun -> [(attribute, dtype)]: every dtype and alias, a blank and an unknown dtype, an attribute
# the data has no column for (`ghost`), one named `id` (a Grist system column: never a value).
ANCHORS: dict[str, list[tuple[str, str]]] = {
    "person": [
        ("person_id", "str"),
        ("name", "text"),
        ("age", "integer"),
        ("height", "float"),
        ("mentor", "boolean"),
        ("born", "date"),
        ("seen", "timestamp"),
        ("odd", "no such dtype"),
        ("ghost", "int"),
        ("id", "int64"),
    ],
    "tagged": [("tagged_id", "string"), ("tags", "choicelist"), ("more", "list[str]"), ("rank", "int")],
    "thing": [("thing_id", "str"), ("label", ""), ("size", "")],  # blank dtypes: sampled
    "city": [],  # no attributes
}
# (anchor1, anchor2, sentence, anchor1 link column, anchor2 link column, directed, [(attribute, dtype)])
LINKS: list[tuple[str, str, str, str, str, bool, list[tuple[str, str]]]] = [
    ("person", "person", "person_knows_person", "", "", False, [("since", "int"), ("how", "str")]),
    ("person", "thing", "person_likes_thing", "", "", True, [("weight", "double"), ("when", "date")]),
    ("person", "city", "person_lives_in_city", "home", "", True, [("since", "int")]),  # a foreign key
    ("tagged", "city", "tagged_seen_in_city", "", "visitors", False, []),  # from the other side
    ("thing", "city", "thing_near_city", "", "", False, [("note", ""), ("far", "")]),  # all blank
]
PEOPLE = [
    # person_id, name, age, height, mentor, born, seen, odd, home
    ["p1", "Ada", "27", "1e20", "yes", "2020-01-02", "2020-01-02 3:04pm", "x", "c1"],
    ["p2", "Bob", "27.0", "0.1", "0", "02.01.2020", "2020-01-02T03:04:05+02:00", "12", "c1, c2"],
    ["p3", "Cy", "-9223372036854775808", "3.0", "TRUE", "01/02/2020", "2020-01-02 03:04", "", ""],
    ["p4", "Di", "9223372036854775807", "-0.0", "off", "2020/01/02", "01/02/2020 03:04", "true", "c2"],
    ["p5", "Ed", "-12", "-2.5e-10", "n", "2020-01-02T10:00:00", "1577934245", "", "nowhere"],
    ["p6", "Fay", "1e3", "1.5e300", "1", "", "", "", ""],
    ["p7", " ", "not a number", "abc", "maybe", "never", "later", "", ""],  # casts refused: dropped
]


def write_csv(folder: Path, name: str, header: list[str], rows: list[list[Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{name}.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def write_model(folder: Path, anchors: dict[str, list[tuple[str, str]]], links: list[Any]) -> Path:
    write_csv(folder, "Anchors", ["noun", "description"], [[noun, ""] for noun in anchors])
    write_csv(
        folder,
        "Anchor_attributes",
        ["anchor", "attribute_name", "dtype", "embeddable"],
        [[noun, name, dtype, ""] for noun, attrs in anchors.items() for name, dtype in attrs],
    )
    write_csv(
        folder,
        "Links",
        LINK_COLUMNS,
        [
            [a1, a2, sentence, "", c1, c2, "1" if directed else "0"]
            for a1, a2, sentence, c1, c2, directed, _ in links
        ],
    )
    write_csv(
        folder,
        "Link_attributes",
        ["link", "attribute_name", "dtype", "embeddable"],
        [[link[2], name, dtype, ""] for link in links for name, dtype in link[6]],
    )
    return folder


def write_data(folder: Path, people: list[list[str]] = PEOPLE) -> Path:
    write_csv(
        folder,
        "Anchor_person",
        ["person_id", "name", "age", "height", "mentor", "born", "seen", "odd", "home", "id"],
        [[*row, str(i + 1)] for i, row in enumerate(people)],
    )
    write_csv(
        folder,
        "Anchor_tagged",
        ["tagged_id", "tags", "more", "rank"],
        [["g1", "a, b", "x", "5"], ["g2", '"c, d", e', "", "-1"], ["g3", "", "", ""]],
    )
    write_csv(
        folder,
        "Anchor_thing",
        ["thing_id", "label", "size"],
        [["t1", "Lamp", "3"], ["t2", "", "big"], ["t3", "Mat", ""]],
    )
    write_csv(folder, "Anchor_city", ["node_id", "visitors"], [["c1", "g1, g2"], ["c2", "g3"], ["c3", ""]])
    write_csv(
        folder,
        "Link_person_knows_person",
        ["from_node_id", "to_node_id", "since", "how"],
        [
            ["p1", "p2", "2001", "work"],
            ["p1", "p1", "2002.0", ""],
            ["p3", "p2", "x", "school"],
            ["p2", "p9", "1", ""],
        ],
    )
    write_csv(
        folder,
        "Link_person_likes_thing",
        ["from_node_id", "to_node_id", "weight", "when"],
        [["p1", "t1", "0.5", "2021-03-04"], ["t2", "p2", "2", "04.03.2021"], ["p3", "t3", "1e20", ""]],
    )
    write_csv(
        folder,
        "Link_thing_near_city",
        ["from_node_id", "to_node_id", "note", "far"],
        [["t1", "c1", "close", "1"], ["c2", "t2", "", "2.5"], ["t3", "t3", "self", ""]],
    )
    return folder


@pytest.fixture
def graphs(session_graph: GraphStore) -> Iterator[tuple[FalkorGraph, FalkorGraph, FalkorGraph]]:
    """Three graphs beside the session's: built by dtypes, by `UNWIND`, by the Python encoder."""
    assert isinstance(session_graph, FalkorGraph)
    yield from scratch_graphs(
        *(FalkorGraph(session_graph.socket_path, f"decl-{name}") for name in ("dtypes", "unwind", "python"))
    )


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[str, ...], bool, bool]]:
    """(names, declared, guessed) of every group the rebuild reads, as it reads it."""
    seen: list[tuple[tuple[str, ...], bool, bool]] = []
    for name in ("_encoded", "_plain"):
        inner = getattr(staging_bulk, name)

        def spy(conn: Any, sql: str, params: Any, size: int, group: Any, inner: Any = inner) -> Any:
            seen.append((group.names, group.declared, group.guessed))
            return inner(conn, sql, params, size, group)

        monkeypatch.setattr(staging_bulk, name, spy)
    return seen


def builds(
    settings: Settings, engine: Engine, graphs: tuple[FalkorGraph, ...], monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[tuple[str, ...], tuple[bool, bool]]]:
    """The snapshots of the three builds of staging as the last sync left it: `vedana index
    --full`'s (by the stored data model's dtypes where they describe staging), the `UNWIND`
    load's and the Python encoder's; and how the first read each group (first)."""
    by_dtypes, by_unwind, by_python = graphs
    with engine.connect() as conn:
        dm = load_data_model(conn)
        upto = staging_version(conn)
    owned = [anchor.noun for anchor in dm.anchors]
    with monkeypatch.context() as patched:
        seen = _reads(patched)
        report = index(
            settings, full=True, engine=engine, graph=by_dtypes, embedder=HashEmbedder(8), graph_batch_size=3
        )
        assert report.graph_rebuilt and report.version == upto
    with engine.connect() as conn:
        load_graph(conn, by_unwind, VersionRange(None, upto), batch_size=3)
    with monkeypatch.context() as patched:
        patched.setattr(staging_bulk, "REVERSE_BYTEA_SINCE", 10**9)  # today's Python encoder
        with engine.connect() as conn:
            rebuild_graph(conn, by_python, upto, owned, batch_size=3, dm=dm)
    snaps = [snapshot(graph) for graph in graphs]
    for snap in snaps:
        for names in ("labels", "relationshipTypes", "propertyKeys"):  # declared keys no row holds
            snap.pop(names)
    first: dict[tuple[str, ...], tuple[bool, bool]] = {}
    for names, is_declared, guessed in seen:  # not a fallback's exact read of the group after
        first.setdefault(names, (is_declared, guessed))
    return snaps[0], snaps[1], snaps[2], first


def first_sync(settings: Settings, engine: Engine, model: Path, data: Path) -> None:
    reset_staging(engine)
    sync(settings, data_model=model, data=data, full=True)


def test_every_dtype_synced_from_a_csv_folder_builds_the_same_graph(
    settings: Settings, pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first_sync(settings, pg_engine, write_model(tmp_path / "m", ANCHORS, LINKS), write_data(tmp_path / "d"))
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert declared == unwind
    assert declared == python
    # The dtype path was taken: no exact group was read.
    assert how[("person",)] == (True, False)  # typed and encoded by Postgres
    assert how[("tagged",)] == (True, False)  # lists: read for Python's encoder
    assert how[("thing",)] == (False, True)  # blank dtypes: sampled
    assert how[("city",)] == (True, False)  # no attributes
    assert how[("person_knows_person", "person", "person")] == (True, False)
    assert how[("thing_near_city", "city", "thing")] == (False, True)
    # What the sync made of the cells reached the graph with the types the dtypes promise.
    [ada] = graphs[0].query("MATCH (n:person {id: 'p1'}) RETURN properties(n) AS p").rows
    assert ada["p"]["age"] == 27 and ada["p"]["mentor"] is True and ada["p"]["born"] == "2020-01-02"
    assert "ghost" not in ada["p"] and "id" in ada["p"] and ada["p"]["id"] == "p1"
    # Floats Python writes with an exponent stay floats of their value (jsonb kept 1e20 as an
    # integer, which the graph clamped to 2**63 - 1), in every build.
    for graph in graphs:
        rows = graph.query("MATCH (n:person) RETURN n.id AS id, n.height AS h").rows
        heights = {row["id"]: row["h"] for row in rows}
        assert heights["p1"] == 1e20 and isinstance(heights["p1"], float)
        assert heights["p6"] == 1.5e300 and heights["p5"] == -2.5e-10 and isinstance(heights["p5"], float)


def _changed(anchors: dict[str, list[tuple[str, str]]], noun: str, **dtypes: str | None) -> dict[str, Any]:
    """`anchors` with `noun`'s attributes retyped (None: removed)."""
    attrs = [
        (name, dtypes.get(name, dtype))
        for name, dtype in anchors[noun]
        if dtypes.get(name, dtype) is not None
    ]
    return {**anchors, noun: attrs}


@pytest.mark.parametrize(
    "change",
    [
        {"age": "str", "mentor": "text"},  # int -> str, bool -> str
        {"odd": "int", "name": "bool"},  # str -> int ("12" only), str -> bool
        {"age": None, "height": None},  # attributes removed
        {"height": "int"},  # float -> int: some values refused by the new cast
    ],
)
@pytest.mark.parametrize("model_only", [False, True])
def test_a_data_model_change_then_a_full_rebuild_builds_the_same_graph(
    settings: Settings,
    pg_engine: Engine,
    graphs,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    change: dict[str, str | None],
    model_only: bool,
) -> None:
    """A changed model reaches staging with the next data sync; a `--data-model-only` sync stores
    it over rows the old model cast, and `vedana index --full` may run before the data sync."""
    data = write_data(tmp_path / "d")
    first_sync(settings, pg_engine, write_model(tmp_path / "m1", ANCHORS, LINKS), data)
    model = write_model(tmp_path / "m2", _changed(ANCHORS, "person", **change), LINKS)
    if model_only:
        assert sync(settings, data_model=model, data_model_only=True).data_model.changed
    else:
        sync(settings, data_model=model, data=data)
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert declared == unwind
    assert declared == python
    # The new model's dtypes describe staging once a data sync cast the rows by it, not before.
    assert any(is_declared for is_declared, _ in how.values()) is not model_only


def test_an_incremental_resync_then_a_full_rebuild_builds_the_same_graph(
    settings: Settings, pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = write_model(tmp_path / "m", ANCHORS, LINKS)
    fillers = [[f"q{i}", f"Q {i}", str(i), f"{i}.5", "yes", "", "", "", ""] for i in range(60)]
    first_sync(settings, pg_engine, model, write_data(tmp_path / "d", PEOPLE + fillers))
    people = [list(row) for row in PEOPLE + fillers]
    people[0][2:5] = ["28.0", "7", "no"]  # age, height, mentor edited
    people[1][5] = "31.12.1999"
    people[3][2:4] = ["-9223372036854775807", "0"]  # (a row added or gone: ids changed, read in full)
    report = sync(settings, data_model=model, data=write_data(tmp_path / "d", people))  # the same folder
    assert report.paths["Anchor_person"].startswith("incremental")
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert declared == unwind
    assert declared == python
    assert how[("person",)] == (True, False)
    assert any("'p4'" in node and "-9223372036854775807" in node for node in declared["nodes"])


@pytest.mark.parametrize("age", ["9223372036854775808", "-9223372036854775809", "1e30"])
def test_an_integer_past_64_bits_builds_the_same_graph(
    settings: Settings,
    pg_engine: Engine,
    graphs,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    age: str,
) -> None:
    """The sync keeps it exact; the `bigint` cast refuses it, and the rebuild reads the exact groups."""
    people = [list(row) for row in PEOPLE]
    people[2][2] = age
    first_sync(
        settings, pg_engine, write_model(tmp_path / "m", ANCHORS, LINKS), write_data(tmp_path / "d", people)
    )
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert how[("person",)] == (True, False)  # read by its dtypes first, then given way
    assert declared == python
    assert declared == unwind


def test_names_of_every_shape_build_the_same_graph(
    settings: Settings, pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Keys reach Postgres as parameters and the graph quoted: spaces, quotes, unicode, `%`."""
    keys = [("full name", "str"), ("größe", "int"), ("it's", "bool"), ("%(k0)s", "str"), ('a."b', "float")]
    anchors = {"Ünï noun": [("node_id", "str"), *keys], "city": []}
    links = [("Ünï noun", "city", 'is in; "it"', "", "", True, [("100%", "int"), ("n'", "date")])]
    write_csv(
        tmp_path / "d",
        "Anchor_Ünï noun",
        ["node_id", *(key for key, _ in keys)],
        [["u1", "A B", "3", "yes", "pct", "0.5"], ["u2", "", "-4", "no", "", "2"]],
    )
    write_csv(tmp_path / "d", "Anchor_city", ["node_id"], [["c1"]])
    write_csv(
        tmp_path / "d",
        'Link_is in; "it"',
        ["from_node_id", "to_node_id", "100%", "n'"],
        [["u1", "c1", "7", "2020-01-01"], ["c1", "u2", "", ""]],
    )
    first_sync(settings, pg_engine, write_model(tmp_path / "m", anchors, links), tmp_path / "d")
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert how[("Ünï noun",)] == (True, False)
    assert len(declared["nodes"]) == 3 and len(declared["edges"]) == 2
    assert declared == unwind
    assert declared == python


@pytest.mark.parametrize("model_only", [False, True])
def test_a_link_made_directed_and_retyped_then_a_full_rebuild_builds_the_same_graph(
    settings: Settings,
    pg_engine: Engine,
    graphs,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    model_only: bool,
) -> None:
    """The edges the other way round go (tombstoned by the data sync, or kept by a model-only
    one), and the link's int attribute becomes text: read in edge groups on connections of their
    own."""
    data = write_data(tmp_path / "d")
    first_sync(settings, pg_engine, write_model(tmp_path / "m1", ANCHORS, LINKS), data)
    knows = ("person", "person", "person_knows_person", "", "", True, [("since", "str"), ("how", "str")])
    model = write_model(tmp_path / "m2", ANCHORS, [knows, *LINKS[1:]])
    if model_only:
        assert sync(settings, data_model=model, data_model_only=True).data_model.changed
    else:
        sync(settings, data_model=model, data=data)
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert declared == unwind
    assert declared == python
    assert any("'since', ['int', 2001]" in edge for edge in declared["edges"]) is model_only
    assert how[("person_knows_person", "person", "person")] == (
        (False, True) if model_only else (True, False)
    )


def test_a_data_model_only_sync_of_prompts_keeps_the_typed_read(
    settings: Settings, pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What `--data-model-only` is for (prompts, descriptions) leaves the staged values' types
    as the model says: the rebuild still reads by dtypes."""
    first_sync(settings, pg_engine, write_model(tmp_path / "m1", ANCHORS, LINKS), write_data(tmp_path / "d"))
    model = write_model(tmp_path / "m2", ANCHORS, LINKS)
    write_csv(model, "Prompts", ["name", "text"], [["no_answer", "Nothing found."]])
    write_csv(model, "Anchors", ["noun", "description"], [[noun, f"All about {noun}"] for noun in ANCHORS])
    assert sync(settings, data_model=model, data_model_only=True).data_model.changed
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert declared == unwind
    assert declared == python
    assert how[("person",)] == (True, False)


@pytest.mark.parametrize("source", ["grist file", "grist api", "csv export"])
def test_the_club_documents_synced_from_grist_build_the_same_graph(
    settings: Settings,
    pg_engine: Engine,
    graphs,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    source: str,
) -> None:
    """Typed cells (Numeric, Date, Bool, ChoiceList, Ref, formulas and their errors) cast by the
    club model's dtypes, through each way Grist's documents are read."""
    model, data = club_model(), club_data()
    blank_staging(pg_engine)
    reset_staging(pg_engine)
    if source == "grist file":
        sync(
            settings,
            data_model=build_grist_file(model, tmp_path / "m.grist"),
            data=build_grist_file(data, tmp_path / "d.grist"),
        )
    else:
        with FakeGrist(model, data, api_key=API_KEY) as fake:
            sync(grist_settings(settings, fake.url), csv=source == "csv export")
    declared, unwind, python, how = builds(settings, pg_engine, graphs, monkeypatch)
    assert how[("person",)] == (True, False)
    assert declared == unwind
    assert declared == python
