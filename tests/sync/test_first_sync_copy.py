"""The first sync COPYs rows straight into staging; later syncs diff. Both must write the same
rows with the same counts, and a hash collision between two edge keys must lose nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, text

from support.sync_kb import blank_staging
from vedana.config import Settings
from vedana.etl.sync import sync
from vedana.stores import staging_write
from vedana.stores import tables as t


def rows(engine: Engine) -> tuple[dict[tuple[str, ...], Any], dict[tuple[str, ...], Any], list[int]]:
    """Staging without versions and times (which differ by design), plus every version."""
    with engine.connect() as conn:
        nodes = {
            (r.node_type, r.node_id): (r.attributes, r.row_hash, r.deleted)
            for r in conn.execute(select(t.nodes)).mappings().all()
            if r.node_type != "zz_other"
        }
        edges = {
            (r.edge_label, r.from_node_type, r.from_node_id, r.to_node_type, r.to_node_id): (
                r.attributes,
                r.row_hash,
                r.deleted,
            )
            for r in conn.execute(select(t.edges)).mappings().all()
        }
        versions = [
            v
            for (v,) in conn.execute(
                text(
                    "SELECT version FROM nodes WHERE node_type <> 'zz_other' UNION ALL SELECT version FROM edges"
                )
            )
        ]
    return nodes, edges, versions


def counts(report: Any) -> dict[str, Any]:
    data = report.to_dict()
    return {"nodes": data["nodes"], "edges": data["edges"], "totals": data["totals"]}


def test_first_sync_writes_what_the_diff_writes(
    settings: Settings, pg_engine: Engine, folders: tuple[Path, Path]
) -> None:
    first = sync(settings, data_model=folders[0], data=folders[1])
    straight_in = rows(pg_engine)

    blank_staging(pg_engine)
    with pg_engine.begin() as conn:  # one tombstone of another type: staging is not empty
        conn.execute(
            insert(t.nodes).values(
                node_type="zz_other", node_id="x", attributes={}, row_hash="-", deleted=True, version=1
            )
        )
    diffed_report = sync(settings, data_model=folders[0], data=folders[1])
    diffed = rows(pg_engine)

    assert straight_in[0] == diffed[0] and straight_in[1] == diffed[1]
    assert counts(first) == counts(diffed_report)
    assert sum(s["skipped"].get("duplicate edge", 0) for s in counts(first)["edges"].values()) > 0
    # Every row its own version, and the sequence continues after them.
    assert len(set(straight_in[2])) == len(straight_in[2])
    assert min(diffed[2]) > max(straight_in[2])


def test_edge_key_hash_collisions_lose_nothing(
    settings: Settings, pg_engine: Engine, folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    normal = sync(settings, data_model=folders[0], data=folders[1])
    expected = rows(pg_engine)

    blank_staging(pg_engine)
    monkeypatch.setattr(staging_write, "_key_hash", lambda key: 0)  # every edge key collides
    collided = sync(settings, data_model=folders[0], data=folders[1])
    got = rows(pg_engine)

    assert got[0] == expected[0] and got[1] == expected[1]
    assert counts(collided) == counts(normal)
    assert len(set(got[2])) == len(got[2])
    again = sync(settings, data_model=folders[0], data=folders[1], full=True)
    assert not again.changed  # the next sync (the diff) finds exactly what the first wrote


ODD_TEXTS = ["tab\there", "new\nline", "cr\rhere", "back\\slash", "\\N", "all\t\n\r\\.", "ünïcode ✓", "x"]


def test_copy_text_keeps_every_character(pg_engine: Engine) -> None:
    """Rows are formatted for COPY by vedana itself: tabs, newlines, carriage returns and
    backslashes in keys and attributes (and a value reading `\\N`, COPY's null) arrive as they
    were, on the straight-in first sync and on the diff of the next one."""
    blank_staging(pg_engine)
    for expect_first in (True, False):
        with pg_engine.begin() as conn, staging_write.StagingWriter(conn) as writer:
            assert writer.first_sync is expect_first
            for text_ in ODD_TEXTS:
                writer.add_node("thing", text_, {"v": text_, "k\t": [text_]})
            for text_ in ODD_TEXTS:
                writer.add_edge("rel\n", "thing", text_, "thing", ODD_TEXTS[0], {"v": text_})
            result = writer.apply()
        nodes, edges, _ = rows(pg_engine)
        assert {key[1] for key in nodes} == set(ODD_TEXTS)
        assert all(attrs == {"v": key[1], "k\t": [key[1]]} for key, (attrs, _, _) in nodes.items())
        assert {key[2] for key in edges} == set(ODD_TEXTS)
        assert all(key[0] == "rel\n" and attrs == {"v": key[2]} for key, (attrs, _, _) in edges.items())
        if not expect_first:  # the same rows again: the hashes match, nothing is rewritten
            assert result.nodes["thing"].unchanged == len(ODD_TEXTS)
            assert result.edges["rel\n"].unchanged == len(ODD_TEXTS)
            assert result.nodes["thing"].updated == result.edges["rel\n"].updated == 0


@pytest.mark.parametrize(
    "attributes",
    [
        {"b": "x", "a": 'ü"\n\\ \u2028 \x01'},
        {"n": 1, "s": "t", "big": 2**70},
        {"l": ["a", 1, None]},
        {"f": 1.5, "g": 1234567.125, "h": -0.0},
        {"b": True, "c": False, "z": None},
        {"d": {"z": 1, "a": "2"}},
    ],
)
def test_attributes_json_is_the_canonical_encoding(attributes: dict[str, Any]) -> None:
    """The encoder made once (`_made_once`) writes exactly what json.dumps writes with sorted keys:
    a stored row's text, and so its hash, never depends on which encoder made it."""
    import json

    canonical = json.dumps(attributes, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert staging_write.attributes_json(attributes) == canonical
    with pytest.raises(ValueError):
        staging_write.attributes_json({**attributes, "nan": float("nan")})


@pytest.mark.parametrize(
    "attributes",
    [
        {"big": 1e20, "tiny": 1e-05, "text": "an e-mail, 3e-5 and 1e+9 as text"},
        {"list": [1e16, 2.5, "x", -1.5e300], "edge": 5e-324, "max": 1.7976931348623157e308},
    ],
)
def test_floats_with_an_exponent_come_back_from_jsonb_as_the_same_floats(
    pg_engine: Engine, attributes: dict[str, Any]
) -> None:
    """jsonb writes a number given as 1e+20 back with no point, which reads as an integer (and
    past 64 bits reached the graph clamped): such floats are written positionally, so jsonb and
    json give back the float, text that looks like one stays text, and the encoding stays one
    per value (equal attributes, equal hashes)."""
    import json

    text = staging_write.attributes_json(attributes)
    assert "e+" not in text.replace("1e+9 as", "") and json.loads(text) == attributes
    with pg_engine.connect() as conn:
        back = json.loads(conn.exec_driver_sql("SELECT %s::jsonb::text", (text,)).scalar_one())
    assert back == attributes
    values = [*back.values(), *back.get("list", [])]
    assert all(isinstance(v, float) for v in values if not isinstance(v, str | list))  # not ints
    assert staging_write.attributes_json(dict(attributes)) == text


def test_the_fast_encoder_writes_what_json_writes() -> None:
    """orjson (`_fast_encode`) takes the dicts of flat values with no float; on thousands of
    random ones (every escaped character, non-BMP text, ints at and past 64 bits, booleans,
    None) `attributes_json` writes exactly json.dumps' canonical text, so no stored hash
    depends on which encoder made it."""
    import json
    import random

    assert staging_write._fast_encode is not None  # orjson is a dependency: the fast path runs
    rnd = random.Random(5)
    alphabet = [chr(c) for c in range(0x80)] + [
        "é",
        "\u2028",
        "\u2029",
        "\ufeff",
        "😀",
        "中",
        "\U0010ffff",
        "\ud800",
    ]

    def value() -> Any:
        kind = rnd.randrange(5)
        if kind == 0:
            return "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(12)))
        if kind == 1:
            return rnd.choice([0, -1, 7, 2**53, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**80])
        if kind == 2:
            return rnd.randrange(-(10**12), 10**12)
        if kind == 3:
            return rnd.choice([True, False])
        return None

    for _ in range(3000):
        attributes = {
            "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 6))): value()
            for _ in range(rnd.randrange(1, 6))
        }
        canonical = json.dumps(attributes, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        assert staging_write.attributes_json(attributes) == canonical, attributes
