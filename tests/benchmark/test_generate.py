"""The synthetic knowledge-base generator: deterministic, exact sizes, valid CSV and .grist output."""

from __future__ import annotations

import csv
import json
import sqlite3
import statistics
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.generate import generate, main, people, regulations
from vedana.errors import ConfigError

SHAPES = ("people", "regulations")


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def all_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module", params=SHAPES)
def kb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """One small knowledge base per shape, in both formats."""
    out = tmp_path_factory.mktemp(request.param)
    generate(request.param, 2_345, seed=7, out=out, fmt="both")
    yield request.param, out


@pytest.mark.parametrize("shape", SHAPES)
def test_same_seed_gives_the_same_bytes(shape: str, tmp_path: Path) -> None:
    generate(shape, 1_500, seed=3, out=tmp_path / "a", fmt="both")
    generate(shape, 1_500, seed=3, out=tmp_path / "b", fmt="both")
    generate(shape, 1_500, seed=4, out=tmp_path / "c", fmt="csv")

    first, second = all_bytes(tmp_path / "a"), all_bytes(tmp_path / "b")
    assert len(first) == 6 + len(json.loads(first["manifest.json"])["tables"]) + 3
    assert first == second
    other = all_bytes(tmp_path / "c")
    data_files = [name for name in other if name.startswith("data/")]
    assert any(first[name] != other[name] for name in data_files)


def test_row_counts_are_exact(kb: tuple[str, Path]) -> None:
    shape, out = kb
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == 2_345
    assert sum(manifest["tables"].values()) == 2_345
    db = sqlite3.connect(out / "data.grist")
    for table, rows in manifest["tables"].items():
        assert rows > 0
        assert len(read_csv(out / "data" / f"{table}.csv")) == rows
        assert db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == rows
    expected_tables = {
        "people": {"Anchor_person", "Anchor_interest", "Anchor_city", "Link_person_has_interest"},
        "regulations": {
            "Anchor_document",
            "Anchor_document_chunk",
            "Anchor_regulation",
            "Link_document_covers_regulation",
            "Link_regulation_amends_regulation",
        },
    }[shape]
    assert set(manifest["tables"]) == expected_tables


def test_grist_metadata_describes_the_user_tables(kb: tuple[str, Path]) -> None:
    _, out = kb
    for name in ("model.grist", "data.grist"):
        db = sqlite3.connect(out / name)
        tables = dict(db.execute('SELECT id, "tableId" FROM "_grist_Tables"').fetchall())
        assert tables
        for table_id, table in tables.items():
            meta = db.execute(
                'SELECT "colId", "type", "isFormula", "visibleCol" FROM "_grist_Tables_column" '
                'WHERE "parentId" = ? ORDER BY "parentPos"',
                (table_id,),
            ).fetchall()
            sql_columns = [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]
            assert sql_columns == ["id", *(m[0] for m in meta)]
            assert meta[0][:2] == ("manualSort", "ManualSortPos")
            for col, col_type, is_formula, visible in meta[1:]:
                assert is_formula == 0
                check_cells(db, table, col, col_type, visible)


def check_cells(db: sqlite3.Connection, table: str, col: str, col_type: str, visible: int) -> None:
    """Every stored value has the representation Grist uses for its column type."""
    values = [row[0] for row in db.execute(f'SELECT "{col}" FROM "{table}"')]
    kind, _, target = col_type.partition(":")
    if kind == "Bool":
        assert set(values) <= {0, 1}
    elif kind in ("Int", "Date"):
        assert all(isinstance(v, int) for v in values if v is not None)
    elif kind == "Numeric":
        assert all(isinstance(v, (int, float)) for v in values if v is not None)
    elif kind == "Text":
        assert all(isinstance(v, str) for v in values)
    elif kind in ("Ref", "RefList"):
        target_rows = {r[0] for r in db.execute(f'SELECT id FROM "{target}"')}
        shown = db.execute('SELECT "colId" FROM "_grist_Tables_column" WHERE id = ?', (visible,)).fetchone()
        assert shown is not None, f"{table}.{col} has no visibleCol"
        if kind == "Ref":
            assert all(v == 0 or v in target_rows for v in values)
            assert any(v != 0 for v in values)
        else:
            lists = [json.loads(v) for v in values if v is not None]
            assert lists and all(set(ids) <= target_rows for ids in lists)
    else:
        pytest.fail(f"unexpected column type {col_type}")


def test_references_agree_between_csv_and_grist(kb: tuple[str, Path]) -> None:
    """A CSV Ref/RefList cell shows the node id of the row the .grist file points at."""
    _, out = kb
    db = sqlite3.connect(out / "data.grist")
    refs = db.execute(
        'SELECT t."tableId", c."colId", c."type", v."colId" FROM "_grist_Tables_column" c '
        'JOIN "_grist_Tables" t ON t.id = c."parentId" JOIN "_grist_Tables_column" v ON v.id = c."visibleCol" '
        "WHERE c.\"type\" LIKE 'Ref%'"
    ).fetchall()
    assert refs
    for table, col, col_type, shown in refs:
        target = col_type.split(":", 1)[1]
        shown_by_row = dict(db.execute(f'SELECT id, "{shown}" FROM "{target}"').fetchall())
        stored = [row[0] for row in db.execute(f'SELECT "{col}" FROM "{table}" ORDER BY id')]
        exported = [row[col] for row in read_csv(out / "data" / f"{table}.csv")]
        for value, text in zip(stored, exported, strict=True):
            if col_type.startswith("RefList:"):
                ids = json.loads(value) if value else []
                assert text == ", ".join(shown_by_row[i] for i in ids)
            else:
                assert text == (shown_by_row[value] if value else "")


def independent_counts(out: Path) -> dict[str, dict[str, int]]:
    """Nodes and edges a sync must produce, derived from the CSV folder by DESIGN.md §4's rules."""
    model, data = out / "model", out / "data"
    nouns = [r["noun"] for r in read_csv(model / "Anchors.csv")]
    ids = {n: [r[f"{n}_id"] for r in read_csv(data / f"Anchor_{n}.csv")] for n in nouns}
    edges: dict[str, int] = {}
    for link in read_csv(model / "Links.csv"):
        a1, a2, sentence = link["anchor1"], link["anchor2"], link["sentence"]
        pairs: set[tuple[str, str]] = set()
        if link["anchor1_link_column_name"]:
            for row in read_csv(data / f"Anchor_{a1}.csv"):
                cell = row[link["anchor1_link_column_name"]]
                pairs |= {(row[f"{a1}_id"], t.strip()) for t in cell.split(",") if t.strip()}
        else:
            pairs |= {
                (r["from_node_id"], r["to_node_id"]) for r in read_csv(data / f"Link_{sentence.lower()}.csv")
            }
        known1, known2 = set(ids[a1]), set(ids[a2])
        assert all(s in known1 and t in known2 for s, t in pairs), f"dangling {sentence} edge"
        if link["has_direction"] == "false":
            pairs |= {(t, s) for s, t in pairs}
        edges[sentence] = len(pairs)
    return {"nodes": {n: len(set(v)) for n, v in ids.items()}, "edges": edges}


def embeddable_values(out: Path) -> dict[str, int]:
    """Non-blank values of each embeddable attribute as staging stores them (an undirected link's
    row twice), counted from the CSV folder: the vectors an index must write."""
    model, data = out / "model", out / "data"
    undirected = {r["sentence"] for r in read_csv(model / "Links.csv") if r["has_direction"] == "false"}
    counts: dict[str, int] = {}
    for kind, owner_col in (("Anchor", "anchor"), ("Link", "link")):
        for attr in read_csv(model / f"{kind}_attributes.csv"):
            if attr["embeddable"] != "true":
                continue
            owner, name = attr[owner_col], attr["attribute_name"]
            table = f"{kind}_{owner.lower() if kind == 'Link' else owner}.csv"
            filled = sum(1 for r in read_csv(data / table) if r[name].strip())
            counts[f"{owner}.{name}"] = filled * (2 if owner in undirected else 1)
    return counts


def test_manifest_counts_match_the_data(kb: tuple[str, Path]) -> None:
    _, out = kb
    manifest = json.loads((out / "manifest.json").read_text())
    counts = independent_counts(out)
    assert manifest["expected"]["nodes"] == counts["nodes"]
    assert manifest["expected"]["edges"] == counts["edges"]
    assert manifest["expected"]["embeddable_values"] == embeddable_values(out)
    # Node ids are unique, so node counts equal row counts.
    assert all(manifest["tables"][f"Anchor_{n}"] == c for n, c in counts["nodes"].items())


def test_model_describes_the_data_columns(kb: tuple[str, Path]) -> None:
    shape, out = kb
    attrs = read_csv(out / "model" / "Anchor_attributes.csv")
    links = read_csv(out / "model" / "Links.csv")
    assert {r["embeddable"] for r in attrs} == {"true", "false"}
    undescribed = []
    for noun in (r["noun"] for r in read_csv(out / "model" / "Anchors.csv")):
        header = next(csv.reader((out / "data" / f"Anchor_{noun}.csv").open(encoding="utf-8")))
        described = {r["attribute_name"] for r in attrs if r["anchor"] == noun}
        link_cols = {lk["anchor1_link_column_name"] for lk in links if lk["anchor1"] == noun}
        undescribed += [c for c in header if c not in described | link_cols]
    assert undescribed == ({"people": [], "regulations": ["document_internal_note"]}[shape])
    if shape == "regulations":
        assert {lk["has_direction"] for lk in links} == {"true", "false"}
        link_attrs = read_csv(out / "model" / "Link_attributes.csv")
        assert [r["attribute_name"] for r in link_attrs if r["embeddable"] == "true"] == ["coverage"]


def test_people_have_a_heavy_tailed_number_of_interests(tmp_path: Path) -> None:
    generate("people", 20_000, seed=11, out=tmp_path, fmt="csv")
    links = read_csv(tmp_path / "data" / "Link_person_has_interest.csv")
    pairs = [(r["from_node_id"], r["to_node_id"]) for r in links]
    assert len(set(pairs)) == len(pairs)
    per_person = sorted(Counter(p for p, _ in pairs).values())
    assert statistics.median(per_person) <= 4
    assert per_person[-1] >= 40
    assert sum(1 for n in per_person if n >= 10) >= len(per_person) // 50
    per_interest = Counter(i for _, i in pairs).most_common()
    assert per_interest[0][1] >= 20 * statistics.median(n for _, n in per_interest)


def test_people_at_100k_rows_give_100k_edge_vectors(tmp_path: Path) -> None:
    """Issue 13 wants search latency at ≥ 100k vectors: at 100k rows the person–interest notes
    alone (50,000 rows, each stored in both directions) fill the edge index to 100,000; the
    notes are nearly all distinct texts, spread over the whole link table."""
    manifest = generate("people", 100_000, seed=1, out=tmp_path, fmt="csv")
    values = manifest["expected"]["embeddable_values"]
    assert values["PERSON_has_INTEREST.note"] == 100_000
    assert sum(values.values()) == 120_200  # + 15,000 persons, 5,000 interests, 200 cities
    assert values == embeddable_values(tmp_path)
    links = read_csv(tmp_path / "data" / "Link_person_has_interest.csv")
    noted = [i for i, r in enumerate(links) if r["note"]]
    assert len({links[i]["note"] for i in noted}) >= 0.99 * len(noted)
    assert noted[0] < 5 and noted[-1] > len(links) - 5
    first = links[noted[0]]
    assert first["since_year"] in first["note"] and first["note"].endswith(f"now {first['skill_level']}.")


def test_shapes_build_rows_lazily() -> None:
    """A million-row plan holds no rows until written (memory stays bounded by the batch)."""
    for build in (people, regulations):
        kb = build(1_000_000, 1)
        for table in kb.data:
            assert not isinstance(table.rows, (list, tuple))
            first = next(iter(table.rows))
            assert len(first) == len(table.columns)


def test_rerun_replaces_its_own_output(tmp_path: Path) -> None:
    generate("regulations", 1_000, seed=1, out=tmp_path, fmt="both")
    generate("people", 1_000, seed=1, out=tmp_path, fmt="csv")
    assert not (tmp_path / "data.grist").exists()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "Anchor_city.csv",
        "Anchor_interest.csv",
        "Anchor_person.csv",
        "Link_person_has_interest.csv",
    ]


def test_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "Anchor_mine.csv").write_text("mine_id\nx\n")
    with pytest.raises(ConfigError, match="empty --out"):
        generate("people", 1_000, seed=1, out=tmp_path)
    assert (tmp_path / "data" / "Anchor_mine.csv").exists()


def test_cli_writes_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--shape", "regulations", "--rows", "1000", "--seed", "2", "--out", str(tmp_path)])
    assert code == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["nodes"]["document_chunk"] > 0
    assert "rows/s" in captured.err
    assert (tmp_path / "data" / "Anchor_regulation.csv").exists()
    assert not (tmp_path / "data.grist").exists()


def test_cli_rejects_a_too_small_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--rows", "10", "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "at least" in err
