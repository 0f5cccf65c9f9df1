"""A small club knowledge base as two Grist documents, crafted so that one sync exercises every
normalisation rule of DESIGN §4, with the nodes and edges it must produce written out by hand.

Data document tables:
- `Anchor_person`: `person_id`; a row without id, a duplicate id (whose references still
  count), a blank row, a formula error, text in a Numeric column, a Ref to a non-anchor table
  (`Teams`), a Ref link column (`person_city`), a RefList link column (`person_friends`) and an
  undescribed column (`person_secret`);
- `Anchor_interest`: no id column, so ids are `interest:<row id>`;
- `Anchor_city`: ids in `node_id`; `city_natives` is a link column on the anchor2 side;
- `Link_person_has_interest` (matched by sentence, case-insensitively): a Ref `from_node_id`,
  edge properties, a duplicate edge, a dangling endpoint, a missing endpoint;
- `Link_interest_city` (matched by `<anchor1>_<anchor2>`), one row given the other way round;
- `Teams` (no prefix), `Anchor_planet` (no such anchor): ignored;
- `Link_misc`: rows whose edge_label names no link.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import SecretStr
from sqlalchemy import Engine, select

from standins.grist_files import Attr, CellError, Col, Doc, LinkSpec, Table, model_doc
from vedana.config import Settings
from vedana.etl.report import SyncReport
from vedana.stores import tables as t

MODEL_DOC_ID = "clubModelDoc01"
DATA_DOC_ID = "clubDataDoc001"
API_KEY = "grist-secret-key-7f3a9c1e"


def club_model() -> Doc:
    return model_doc(
        MODEL_DOC_ID,
        ["person", "interest", "city"],
        [
            Attr("person", "person_id", "str"),
            Attr("person", "person_name", "str", embeddable=True, embed_threshold=0.5, embed_top_n=7),
            Attr("person", "person_age", "int"),
            Attr("person", "person_height", "float"),
            Attr("person", "person_joined", "date"),
            Attr("person", "person_is_mentor", "bool"),
            Attr("person", "person_nickname", "str"),
            Attr("person", "person_tags", "list"),
            Attr("person", "person_team", "str"),
            Attr("person", "person_city", "str"),  # a link column: never a property
            Attr("interest", "interest_name", "str", embeddable=True),
            Attr("city", "city_name", ""),
        ],
        [
            LinkSpec("PERSON_has_INTEREST", "person", "interest", has_direction=False),
            LinkSpec("PERSON_lives_in_CITY", "person", "city", True, anchor1_link_column_name="person_city"),
            LinkSpec(
                "PERSON_knows_PERSON", "person", "person", False, anchor1_link_column_name="person_friends"
            ),
            LinkSpec("PERSON_born_in_CITY", "person", "city", True, anchor2_link_column_name="city_natives"),
            LinkSpec("INTEREST_featured_in_CITY", "interest", "city", True),
        ],
        link_attributes=[
            Attr("PERSON_has_INTEREST", "skill", "str", embeddable=True),
            Attr("PERSON_has_INTEREST", "since", "int"),
        ],
        queries=[("Who likes <interest>?", "MATCH (p:person)-[:PERSON_has_INTEREST]->(i) RETURN p")],
        prompts=[("no_answer", "Nothing found.")],
    )


def club_data() -> Doc:
    person_cols = [
        Col("person_id"),
        Col("person_name"),
        Col("person_age", "Numeric"),
        Col("person_height", "Numeric"),
        Col("person_joined", "Date"),
        Col("person_is_mentor", "Bool"),
        Col("person_nickname", "Any", formula="$person_name.lower()"),
        Col("person_tags", "ChoiceList"),
        Col("person_team", "Ref:Teams", visible="team_name"),
        Col("person_city", "Ref:Anchor_city", visible="node_id"),
        Col("person_friends", "RefList:Anchor_person", visible="person_id"),
        Col("person_secret"),
    ]

    def person(pid: str, name: str, **cells: Any) -> dict[str, Any]:
        return {"person_id": pid, "person_name": name, **cells}

    people = [
        person(
            "p1",
            "Ada",
            person_age=34.0,
            person_height=1.7,
            person_joined=date(2019, 4, 12),
            person_is_mentor=True,
            person_nickname="ada",
            person_tags=["chess", "go"],
            person_team=1,
            person_city=1,
            person_friends=[2],
            person_secret="not described",
        ),
        person("p2", "Bo", person_age=41.0, person_is_mentor=False, person_nickname="bo", person_friends=[4]),
        person("", "Ghost", person_nickname="ghost"),  # row 3: no id
        person("p1", "Ada again", person_nickname="ada again", person_city=2),  # row 4: duplicate of p1
        {},  # row 5: blank
        person(
            "p3", "Cy", person_age="n/a", person_nickname=CellError("NameError"), person_team=2, person_city=2
        ),
    ]
    return Doc(
        DATA_DOC_ID,
        [
            Table("Anchor_person", person_cols, people),
            Table(
                "Anchor_interest",
                [Col("interest_name"), Col("interest_rank", "Int")],
                [{"interest_name": "chess", "interest_rank": 1}, {"interest_name": "go", "interest_rank": 2}],
            ),
            Table(
                "Anchor_city",
                [
                    Col("node_id"),
                    Col("city_name"),
                    Col("city_natives", "RefList:Anchor_person", visible="person_id"),
                ],
                [
                    {"node_id": "c1", "city_name": "Lisbon", "city_natives": [1]},
                    {"node_id": "c2", "city_name": "Porto", "city_natives": [2, 6]},
                ],
            ),
            Table(
                "Link_person_has_interest",
                [
                    Col("from_node_id", "Ref:Anchor_person", visible="person_id"),
                    Col("to_node_id"),
                    Col("edge_label"),
                    Col("skill"),
                    Col("since", "Numeric"),
                    Col("note"),
                ],
                [
                    {
                        "from_node_id": 1,
                        "to_node_id": "interest:1",
                        "edge_label": "PERSON_has_INTEREST",
                        "skill": "expert",
                        "since": 2001.0,
                        "note": "undescribed",
                    },
                    {
                        "from_node_id": 2,
                        "to_node_id": "interest:2",
                        "edge_label": "person_has_interest",
                        "skill": "novice",
                        "since": 2019.0,
                    },
                    {
                        "from_node_id": 1,
                        "to_node_id": "interest:1",
                        "edge_label": "PERSON_has_INTEREST",
                        "skill": "repeated row",
                        "since": 1999.0,
                    },
                    {"from_node_id": 2, "to_node_id": "interest:99", "edge_label": "PERSON_has_INTEREST"},
                    {"from_node_id": 0, "to_node_id": "interest:1", "edge_label": "PERSON_has_INTEREST"},
                ],
            ),
            Table(
                "Link_interest_city",
                [Col("from_node_id"), Col("to_node_id"), Col("edge_label")],
                [
                    {"from_node_id": "interest:1", "to_node_id": "c1", "edge_label": ""},
                    {"from_node_id": "c2", "to_node_id": "interest:2", "edge_label": ""},
                ],
            ),
            Table("Teams", [Col("team_name")], [{"team_name": "Red"}, {"team_name": "Blue"}]),
            Table("Anchor_planet", [Col("planet_name")], [{"planet_name": "Mars"}]),
            Table(
                "Link_misc",
                [Col("from_node_id"), Col("to_node_id"), Col("edge_label")],
                [{"from_node_id": "p1", "to_node_id": "p2", "edge_label": "IS_COUSIN_OF"}],
            ),
        ],
    )


# What a sync of club_model() + club_data() must leave in staging (live rows only).
EXPECTED_NODES: dict[tuple[str, str], dict[str, Any]] = {
    ("person", "p1"): {
        "person_id": "p1",
        "person_name": "Ada",
        "person_age": 34,
        "person_height": 1.7,
        "person_joined": "2019-04-12",
        "person_is_mentor": True,
        "person_nickname": "ada",
        "person_tags": ["chess", "go"],
        "person_team": "Red",
    },
    ("person", "p2"): {
        "person_id": "p2",
        "person_name": "Bo",
        "person_age": 41,
        "person_is_mentor": False,
        "person_nickname": "bo",
    },
    # "n/a" is no int, the nickname formula failed: both omitted.
    ("person", "p3"): {"person_id": "p3", "person_name": "Cy", "person_team": "Blue"},
    ("interest", "interest:1"): {"interest_name": "chess"},
    ("interest", "interest:2"): {"interest_name": "go"},
    ("city", "c1"): {"city_name": "Lisbon"},
    ("city", "c2"): {"city_name": "Porto"},
}

_SKILLED = {"skill": "expert", "since": 2001}
_NOVICE = {"skill": "novice", "since": 2019}
EXPECTED_EDGES: dict[tuple[str, str, str], dict[str, Any]] = {
    # undirected: both ways, same properties; the repeated row collapsed into the first
    ("PERSON_has_INTEREST", "p1", "interest:1"): _SKILLED,
    ("PERSON_has_INTEREST", "interest:1", "p1"): _SKILLED,
    ("PERSON_has_INTEREST", "p2", "interest:2"): _NOVICE,
    ("PERSON_has_INTEREST", "interest:2", "p2"): _NOVICE,
    # Ref column on person; the duplicate row 4 (p1) still contributes its city
    ("PERSON_lives_in_CITY", "p1", "c1"): {},
    ("PERSON_lives_in_CITY", "p1", "c2"): {},
    ("PERSON_lives_in_CITY", "p3", "c2"): {},
    # RefList on person, undirected; p2's reference to row 4 means p1
    ("PERSON_knows_PERSON", "p1", "p2"): {},
    ("PERSON_knows_PERSON", "p2", "p1"): {},
    # RefList on the anchor2 side (city): edges still run person → city
    ("PERSON_born_in_CITY", "p1", "c1"): {},
    ("PERSON_born_in_CITY", "p2", "c2"): {},
    ("PERSON_born_in_CITY", "p3", "c2"): {},
    # matched by <anchor1>_<anchor2>; the reversed row turned to interest → city
    ("INTEREST_featured_in_CITY", "interest:1", "c1"): {},
    ("INTEREST_featured_in_CITY", "interest:2", "c2"): {},
}


# --- reading staging back --------------------------------------------------------------------


def grist_settings(settings: Settings, url: str, key: str = API_KEY, **extra: Any) -> Settings:
    """`settings` pointed at a (fake) Grist server holding the club documents."""
    return settings.model_copy(
        update={
            "grist_server_url": url,
            "grist_api_key": SecretStr(key),
            "grist_data_model_doc_id": MODEL_DOC_ID,
            "grist_data_doc_id": DATA_DOC_ID,
            **extra,
        }
    )


def blank_staging(engine: Engine) -> None:
    """Empty the data model, nodes, edges and the sync state."""
    with engine.begin() as conn:
        for table in (
            t.nodes,
            t.edges,
            t.dm_anchor_attributes,
            t.dm_link_attributes,
            t.dm_anchors,
            t.dm_links,
            t.dm_queries,
            t.dm_prompts,
            t.dm_conversation_lifecycle,
        ):
            conn.execute(table.delete())
        conn.execute(t.vedana_state.delete().where(t.vedana_state.c.key.like("sync.%")))


def live_nodes(engine: Engine) -> dict[tuple[str, str], dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.nodes.c.node_type, t.nodes.c.node_id, t.nodes.c.attributes).where(~t.nodes.c.deleted)
        )
        return {(r.node_type, r.node_id): r.attributes for r in rows}


def live_edges(engine: Engine) -> dict[tuple[str, str, str], dict[str, Any]]:
    columns = (t.edges.c.edge_label, t.edges.c.from_node_id, t.edges.c.to_node_id, t.edges.c.attributes)
    with engine.connect() as conn:
        rows = conn.execute(select(*columns).where(~t.edges.c.deleted))
        return {(r.edge_label, r.from_node_id, r.to_node_id): r.attributes for r in rows}


def staging_rows(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every staging row with its version, tombstone and timestamp: equal before and after a
    run only if the run wrote nothing."""
    with engine.connect() as conn:
        return {
            table.name: sorted(tuple(r) for r in conn.execute(select(table)))
            for table in (t.nodes, t.edges, t.dm_anchors, t.dm_anchor_attributes, t.dm_links)
        }


def staging_state(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Staging as data: keys, attributes, hashes, tombstones (not versions or times): what a
    re-sync and a full sync of the same files must both leave."""
    with engine.connect() as conn:
        nodes = conn.execute(
            select(
                t.nodes.c.node_type,
                t.nodes.c.node_id,
                t.nodes.c.attributes,
                t.nodes.c.row_hash,
                t.nodes.c.deleted,
            )
        )
        edges = conn.execute(
            select(
                t.edges.c.edge_label,
                t.edges.c.from_node_type,
                t.edges.c.from_node_id,
                t.edges.c.to_node_type,
                t.edges.c.to_node_id,
                t.edges.c.attributes,
                t.edges.c.row_hash,
                t.edges.c.deleted,
            )
        )
        return {
            "nodes": sorted(tuple(map(str, r)) for r in nodes),
            "edges": sorted(tuple(map(str, r)) for r in edges),
        }


def report_counts(report: SyncReport) -> dict[str, Any]:
    """A sync report's counts, without what differs between equal runs (times, ids, paths)."""
    data = report.to_dict()
    for key in ("seconds", "rows_per_s", "run_id", "version", "paths", "unchanged_early"):
        data.pop(key)
    return data
