#!/usr/bin/env python3
"""Write the two sample knowledge bases (`people/`, `regulations/`) and their expected sync counts.

Stdlib only and seeded, so running it again produces the same bytes. Each sample is a `model/`
folder (the Data Model document) and a `data/` folder (the data document), CSV files shaped like
Grist's CSV export: `\\n` line ends, minimal quoting, Bools as `true`/`false`, a RefList as its
display values joined by ", ". In these folders a Ref/RefList cell holds the referenced row's node id.

The expected counts are computed by re-reading the written CSV files and applying the sync rules of
DESIGN.md §4 (not by trusting the generator), then saved to `<sample>/expected.json` and printed.

Usage: python samples/make_samples.py [--out DIR] [--check]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import re
import sys
import tempfile
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20240615
RECORD_TYPES = {"model", "data"}


# --------------------------------------------------------------------------------------------
# CSV writing in Grist's export dialect
# --------------------------------------------------------------------------------------------


def csv_text(header: list[str], rows: list[list[object]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([cell_text(v) for v in row])
    return buf.getvalue()


def cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


class SampleWriter:
    """Collects a sample's files in memory, then writes them (or compares them, for --check)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, str] = {}

    def table(self, folder: str, name: str, header: list[str], rows: list[list[object]]) -> None:
        assert folder in RECORD_TYPES
        self.files[f"{folder}/{name}.csv"] = csv_text(header, rows)

    def write(self) -> None:
        for rel, text in self.files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="")

    def differences(self) -> list[str]:
        out = []
        for rel, text in self.files.items():
            path = self.root / rel
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                out.append(str(path))
        return out


ANCHOR_HEADER = ["noun", "description", "id_example", "query"]
ATTR_HEADER = ["attribute_name", "description", "data_example", "embeddable", "query", "dtype"]
ATTR_HEADER += ["embed_threshold", "embed_top_n"]
LINK_HEADER = ["anchor1", "anchor2", "sentence", "description", "query", "anchor1_link_column_name"]
LINK_HEADER += ["anchor2_link_column_name", "has_direction"]


def attr(
    owner: str,
    name: str,
    description: str,
    example: str,
    dtype: str,
    embeddable: bool = False,
    query: str = "",
    threshold: float | None = None,
    top_n: int | None = None,
) -> list[object]:
    """One Anchor_attributes / Link_attributes row; `owner` is the anchor noun or link sentence."""
    return [owner, name, description, example, embeddable, query, dtype, threshold, top_n]


# --------------------------------------------------------------------------------------------
# Sample 1: people, interests, cities
# --------------------------------------------------------------------------------------------


def words(block: str) -> list[str]:
    """A whitespace-separated word block, which reads better than a long list literal."""
    return block.split()


FIRST_NAMES = words("""
Ada Aiko Amara Anders Anika Aroha Astrid Bea Benedikt Bongani Camila Chidi Dario Dilnoza Elif
Emeka Esme Farid Freya Gaspard Greta Hana Hamid Ines Ivo Jalen Jonas Kaia Kenji Kofi Lale Leon
Liv Lucia Mads Malik Mariana Mateo Mei Mira Nadia Nikolai Noor Olek Oona Pablo Priya Quentin
Rafael Rania Rosa Sanna Sefa Soren Tamsin Teodor Thandi Uma Valentin Wren Xiomara Yara Yusuf Zofia
""")

LAST_NAMES = words("""
Abara Alvarez Andersen Bakshi Barros Bianchi Brennan Castell Chowdhury Dahl Delacroix Demir Eze
Falk Ferreira Fujita Gallo Haddad Halvorsen Ibarra Ivanova Jansen Kamau Karlsson Kowalski Laine
Lindqvist Mahlaba Marchetti Moreau Murata Nakamura Nilsen Novak Okafor Olsen Oyelaran Park Petrov
Quispe Rahman Reyes Rossi Saarinen Sato Schmidt Silva Sokolova Tanaka Torres Uddin Varga Vidal
Wagner Weiss Yilmaz Young Zamora Zeller
""")

CITIES = [
    ("lisbon", "Lisbon", "Portugal"),
    ("porto", "Porto", "Portugal"),
    ("valencia", "Valencia", "Spain"),
    ("lyon", "Lyon", "France"),
    ("ghent", "Ghent", "Belgium"),
    ("utrecht", "Utrecht", "Netherlands"),
    ("leipzig", "Leipzig", "Germany"),
    ("gdansk", "Gdańsk", "Poland"),
    ("tartu", "Tartu", "Estonia"),
    ("bergen", "Bergen", "Norway"),
    ("aarhus", "Aarhus", "Denmark"),
    ("bologna", "Bologna", "Italy"),
    ("ljubljana", "Ljubljana", "Slovenia"),
    ("izmir", "İzmir", "Turkey"),
    ("nairobi", "Nairobi", "Kenya"),
    ("accra", "Accra", "Ghana"),
    ("montreal", "Montréal", "Canada"),
    ("oaxaca", "Oaxaca", "Mexico"),
    ("valparaiso", "Valparaíso", "Chile"),
    ("kyoto", "Kyoto", "Japan"),
    ("busan", "Busan", "South Korea"),
    ("hobart", "Hobart", "Australia"),
]

# Interest names are built by combining these curated lists; each family has a category.
PERIODS = [
    "medieval", "renaissance", "baroque", "victorian", "ancient greek", "ancient roman",
    "ancient egyptian", "viking age", "byzantine", "ottoman", "edo period", "ming dynasty",
    "aztec", "art deco", "1920s", "1960s", "1980s", "cold war", "bronze age", "georgian",
]  # fmt: skip
PERIOD_DOMAINS = ["history", "architecture", "fashion", "music", "art", "literature", "cooking",
                  "maps", "furniture", "coins"]  # fmt: skip
ANIMALS = [
    "quokkas", "axolotls", "otters", "red pandas", "capybaras", "octopuses", "hummingbirds",
    "owls", "wolves", "honeybees", "jellyfish", "tardigrades", "pangolins", "sloths", "penguins",
    "puffins", "hedgehogs", "chameleons", "manta rays", "orcas", "seahorses", "fireflies", "moths",
    "beetles", "crows and ravens", "herons", "salamanders", "lemurs", "meerkats", "wombats",
    "koalas", "snow leopards", "bats", "tree frogs", "tortoises", "dragonflies", "butterflies",
    "sharks", "humpback whales", "red foxes",
]  # fmt: skip
ANIMAL_FORMS = ["{}", "{} in the wild", "drawing {}", "{} documentaries", "conservation of {}"]
CRAFTS = [
    "woodworking", "pottery", "knitting", "weaving", "embroidery", "bookbinding", "calligraphy",
    "leatherwork", "glassblowing", "papermaking", "basket weaving", "quilting", "printmaking",
    "metalsmithing", "origami", "candle making", "soap making", "jewelry making", "stained glass",
    "wood carving",
]  # fmt: skip
CRAFT_STYLES = ["japanese", "scandinavian", "moroccan", "mexican", "indian", "persian", "celtic",
                "west african", "korean", "andean", "shaker", "italian"]  # fmt: skip
BAKES = ["sourdough", "croissant", "bagel", "focaccia", "rye bread", "pretzel", "brioche",
         "baguette", "cinnamon roll", "macaron", "pie crust", "flatbread"]  # fmt: skip
FERMENTS = ["kimchi", "sauerkraut", "kombucha", "miso", "kefir", "tempeh", "hot sauce", "mead",
            "cider", "natural wine"]  # fmt: skip
CUISINES = [
    "thai", "sichuan", "neapolitan", "basque", "ethiopian", "peruvian", "lebanese", "georgian",
    "vietnamese", "oaxacan", "sicilian", "cantonese", "keralan", "turkish", "filipino", "nordic",
    "cajun", "malaysian", "greek", "korean",
]  # fmt: skip
CUISINE_FORMS = ["{} cooking", "{} street food", "{} desserts", "{} cookbooks"]
SPORTS = [
    "bouldering", "trail running", "open water swimming", "table tennis", "badminton", "fencing",
    "rowing", "road cycling", "surfing", "skateboarding", "archery", "judo", "ultimate frisbee",
    "cricket", "rugby", "volleyball", "curling", "cross-country skiing", "sailing", "kayaking",
    "yoga", "pilates", "powerlifting", "triathlon", "speed skating", "handball", "water polo",
    "padel", "squash", "golf",
]  # fmt: skip
SPORT_FORMS = ["{}", "{} coaching", "{} statistics", "{} competitions"]
SCIENCES = [
    "astronomy", "mycology", "geology", "botany", "entomology", "ornithology", "paleontology",
    "oceanography", "meteorology", "volcanology", "linguistics", "archaeology", "cryptography",
    "robotics", "quantum physics", "neuroscience", "genetics", "marine biology", "particle physics",
    "climate science", "number theory", "game theory", "topology", "epidemiology", "glaciology",
]  # fmt: skip
SCIENCE_FORMS = ["{}", "amateur {}", "history of {}", "{} podcasts", "{} lectures"]
GENRES = [
    "jazz", "baroque", "bossa nova", "afrobeat", "synthwave", "bluegrass", "flamenco", "k-pop",
    "shoegaze", "reggae", "gospel", "opera", "post-rock", "city pop", "highlife", "klezmer", "fado",
    "trip hop", "ambient", "delta blues", "drum and bass", "sea shanty", "gregorian chant",
    "chiptune", "cumbia",
]  # fmt: skip
GENRE_FORMS = ["{} music", "{} vinyl collecting", "{} concerts"]
INSTRUMENTS = ["piano", "cello", "violin", "ukulele", "banjo", "harp", "accordion", "theremin",
               "bagpipes", "sitar", "oud", "didgeridoo", "saxophone", "trumpet", "drums",
               "bass guitar", "mandolin", "flute", "harmonica", "koto"]  # fmt: skip
INSTRUMENT_FORMS = ["playing the {}", "{} repair", "{} history"]
GAMES = [
    "chess", "go", "backgammon", "mahjong", "bridge", "poker", "crossword puzzles", "sudoku",
    "tabletop role-playing games", "board game design", "speedrunning", "retro video games",
    "escape rooms", "rubik's cubes", "scrabble", "dominoes", "shogi", "pub quizzes",
    "jigsaw puzzles", "card magic",
]  # fmt: skip
GAME_FORMS = ["{}", "{} tournaments"]
OUTDOORS = [
    "birdwatching", "stargazing", "foraging", "rock climbing", "wild camping", "canoeing",
    "geocaching", "beekeeping", "urban gardening", "bonsai", "orchid growing", "cactus collecting",
    "composting", "tree identification", "tide pooling", "storm chasing", "fly fishing", "hiking",
    "snowshoeing", "permaculture",
]  # fmt: skip
LANDSCAPES = ["alpine", "desert", "coastal", "rainforest", "arctic", "volcanic", "prairie",
              "wetland"]  # fmt: skip
LANDSCAPE_FORMS = ["{} hiking", "{} photography", "{} ecology"]

INTEREST_COUNT = 1100
PERSON_COUNT = 300
SKILL_LEVELS = [("curious", 5), ("beginner", 4), ("intermediate", 3), ("expert", 1)]


def interest_catalogue() -> list[tuple[str, str]]:
    """Every (name, category) the curated lists combine into, first spelling of a name wins."""
    combos: list[tuple[str, str]] = []
    combos += [(f"{p} {d}", "history and culture") for p in PERIODS for d in PERIOD_DOMAINS]
    combos += [(form.format(a), "animals") for a in ANIMALS for form in ANIMAL_FORMS]
    combos += [(c, "crafts") for c in CRAFTS]
    combos += [(f"{s} {c}", "crafts") for s in CRAFT_STYLES for c in CRAFTS]
    combos += [(f"{b} baking", "food and drink") for b in BAKES]
    combos += [(f"{f} making", "food and drink") for f in FERMENTS]
    combos += [(form.format(c), "food and drink") for c in CUISINES for form in CUISINE_FORMS]
    combos += [(form.format(s), "sports") for s in SPORTS for form in SPORT_FORMS]
    combos += [(form.format(s), "science") for s in SCIENCES for form in SCIENCE_FORMS]
    combos += [(form.format(g), "music") for g in GENRES for form in GENRE_FORMS]
    combos += [(form.format(i), "music") for i in INSTRUMENTS for form in INSTRUMENT_FORMS]
    combos += [(form.format(g), "games") for g in GAMES for form in GAME_FORMS]
    combos += [(o, "outdoors") for o in OUTDOORS]
    combos += [(form.format(x), "outdoors") for x in LANDSCAPES for form in LANDSCAPE_FORMS]
    seen: dict[str, str] = {}
    for name, category in combos:
        seen.setdefault(name, category)
    return list(seen.items())


def heavy_tailed_degree(rng: random.Random, low: int, high: int) -> int:
    """Pareto-distributed count: most people have a few interests, some have dozens."""
    return max(low, min(high, int(1.6 / (rng.random() ** (1 / 1.3)))))


def build_people(root: Path) -> SampleWriter:
    rng = random.Random(SEED)
    out = SampleWriter(root)

    # --- data model ---
    person_q = "MATCH (p:person) WHERE p.person_name = 'Ada Okafor' RETURN p.id, p.person_age"
    interest_q = (
        "MATCH (i:interest) WHERE i.interest_name = 'sourdough baking' RETURN i.id, i.interest_category"
    )
    city_q = "MATCH (c:city {id: 'lisbon'})<-[:PERSON_lives_in_CITY]-(p:person) RETURN p.person_name"
    out.table(
        "model",
        "Anchors",
        ANCHOR_HEADER,
        [
            ["person", "A member of the hobby club directory.", "person:0001", person_q],
            ["interest", "A hobby or topic people say they care about.", "interest:0001", interest_q],
            ["city", "The city a person lives in; its id is a lowercase slug.", "lisbon", city_q],
        ],
    )
    out.table(
        "model",
        "Anchor_attributes",
        ["anchor", *ATTR_HEADER],
        [
            attr("person", "person_id", "Node id of the person.", "person:0042", "str"),
            attr("person", "person_name", "Full name, first name then family name.", "Ada Okafor", "str",
                 True, "MATCH (p:person) WHERE p.person_name = $name RETURN p", 0.5, 10),
            attr("person", "person_age", "Age in whole years.", "34", "int",
                 query="MATCH (p:person) WHERE p.person_age >= 60 RETURN count(p)"),
            attr("person", "person_joined", "Date the person joined the club.", "2019-04-12", "date"),
            attr("person", "person_is_mentor", "Whether the person mentors newcomers.", "true", "bool",
                 query="MATCH (p:person {person_is_mentor: true}) RETURN p.person_name"),
            attr("interest", "interest_id", "Node id of the interest.", "interest:0007", "str"),
            attr("interest", "interest_name", "Name of the hobby or topic.", "sourdough baking", "str",
                 True, "MATCH (i:interest) WHERE i.interest_name = $name RETURN i", 0.45, 15),
            attr("interest", "interest_category", "Broad family of the interest.", "food and drink", "str",
                 query="MATCH (i:interest {interest_category: 'music'}) RETURN count(i)"),
            attr("city", "city_id", "Node id of the city (a slug).", "lisbon", "str"),
            attr("city", "city_name", "City name as locals write it.", "Lisbon", "str", True,
                 threshold=0.6, top_n=5),
            attr("city", "city_country", "Country of the city.", "Portugal", "str"),
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Links",
        LINK_HEADER,
        [
            ["person", "interest", "PERSON_has_INTEREST",
             "The person enjoys the interest. Undirected: it can be walked from either side.",
             "MATCH (p:person)-[:PERSON_has_INTEREST]-(i:interest) WHERE i.interest_name = $name "
             "RETURN p.person_name",
             "", "", False],
            ["person", "city", "PERSON_lives_in_CITY",
             "The person lives in the city; comes from the person_city column of Anchor_person.",
             "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city) RETURN c.city_name, count(p)",
             "person_city", "", True],
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Link_attributes",
        ["link", *ATTR_HEADER],
        [
            attr("PERSON_has_INTEREST", "skill_level", "How far along the person is.", "beginner", "str",
                 query="MATCH (p)-[r:PERSON_has_INTEREST {skill_level: 'expert'}]->(i) RETURN p, i"),
            attr("PERSON_has_INTEREST", "since_year", "Year the person picked the interest up.", "2017",
                 "int"),
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Queries",
        ["query_name", "query_example"],
        [
            ["Who is interested in <interest>?",
             "1) vector_text_search(label=\"interest\", property=\"interest_name\", text=\"<interest>\") "
             "and take the best hit's id.\n"
             "2) MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {id: $id}) "
             "RETURN p.person_name ORDER BY p.person_name"],
            ["How many interests does <person> have?",
             "1) vector_text_search(label=\"person\", property=\"person_name\", text=\"<person>\").\n"
             "2) MATCH (p:person {id: $id})-[:PERSON_has_INTEREST]->(i:interest) RETURN count(i)"],
            ["Which interests are most popular?",
             "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest) "
             "RETURN i.interest_name, count(p) AS people ORDER BY people DESC LIMIT 10"],
            ["Who in <city> shares an interest with <person>?",
             "MATCH (a:person {id: $person_id})-[:PERSON_has_INTEREST]->(i:interest)"
             "<-[:PERSON_has_INTEREST]-(b:person)-[:PERSON_lives_in_CITY]->(c:city {id: $city_id}) "
             "WHERE a <> b RETURN b.person_name, collect(i.interest_name) AS shared"],
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Prompts",
        ["name", "text"],
        [
            ["no_answer",
             "I could not find that in the hobby club directory. Try naming a person, an interest "
             "or a city, for example: who in Lisbon is into sourdough baking?"],
        ],
    )  # fmt: skip
    out.table(
        "model",
        "ConversationLifecycle",
        ["event", "text"],
        [["/start", "Hi! Ask me who likes what, and where they live."]],
    )

    # --- data ---
    catalogue = interest_catalogue()
    rng.shuffle(catalogue)
    interests = catalogue[:INTEREST_COUNT]
    interest_ids = [f"interest:{i + 1:04d}" for i in range(len(interests))]
    out.table(
        "data",
        "Anchor_interest",
        ["interest_id", "interest_name", "interest_category"],
        [[iid, name, cat] for iid, (name, cat) in zip(interest_ids, interests, strict=True)],
    )
    out.table(
        "data",
        "Anchor_city",
        ["city_id", "city_name", "city_country"],
        [list(c) for c in CITIES],
    )

    names = sorted({f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES})
    people_names = rng.sample(names, PERSON_COUNT)
    # Popularity of interests is skewed too: a few are shared by many people.
    popularity = [1.0 / (rank + 1) ** 0.8 for rank in range(len(interest_ids))]
    person_rows: list[list[object]] = []
    link_rows: list[list[object]] = []
    for n, name in enumerate(people_names, start=1):
        pid = f"person:{n:04d}"
        city = "" if rng.random() < 0.05 else rng.choice(CITIES)[0]
        joined = date(2015, 1, 1) + timedelta(days=rng.randrange(0, 3650))
        person_rows.append([pid, name, rng.randint(19, 78), joined, city, rng.random() < 0.2])
        chosen: set[int] = set()
        for _ in range(heavy_tailed_degree(rng, 1, 45)):
            pick = rng.choices(range(len(interest_ids)), weights=popularity)[0]
            if pick in chosen:
                continue
            chosen.add(pick)
            level = rng.choices([s for s, _ in SKILL_LEVELS], weights=[w for _, w in SKILL_LEVELS])[0]
            link_rows.append([pid, interest_ids[pick], "PERSON_has_INTEREST", level, rng.randint(1995, 2024)])
    out.table(
        "data",
        "Anchor_person",
        ["person_id", "person_name", "person_age", "person_joined", "person_city", "person_is_mentor"],
        person_rows,
    )
    out.table(
        "data",
        "Link_person_has_interest",
        ["from_node_id", "to_node_id", "edge_label", "skill_level", "since_year"],
        link_rows,
    )
    return out


# --------------------------------------------------------------------------------------------
# Sample 2: documents, document chunks, regulations
# --------------------------------------------------------------------------------------------

# (topic, regulation code prefix, publisher, duties). Each duty is one regulation.
TOPICS = [
    ("cold storage", "CS", "National Food Standards Office", [
        "log refrigerator temperatures twice a day",
        "keep chilled food at or below 5 °C",
        "calibrate probe thermometers every month",
        "store raw meat below ready-to-eat food",
        "discard food left unrefrigerated for more than four hours",
        "defrost freezers on a written schedule",
    ]),
    ("allergen labelling", "AL", "National Food Standards Office", [
        "name the fourteen major allergens on every menu",
        "label pre-packed food with allergens in bold",
        "keep a written allergen matrix for each dish",
        "use separate utensils for allergen-free orders",
        "retrain staff on allergens every year",
        "record supplier changes that affect allergens",
    ]),
    ("fire safety", "FS", "Fire and Rescue Authority", [
        "keep fire exits unobstructed at all times",
        "test the fire alarm every week",
        "service fire extinguishers once a year",
        "run an evacuation drill twice a year",
        "store flammable liquids in approved cabinets",
        "appoint a trained fire warden for each floor",
    ]),
    ("hand hygiene", "HH", "City Environmental Health Department", [
        "provide a dedicated hand-wash basin in food areas",
        "supply hot water, soap and disposable towels",
        "wash hands before handling ready-to-eat food",
        "cover cuts with blue waterproof dressings",
        "exclude staff with vomiting or diarrhoea for 48 hours",
        "display hand-washing instructions at every basin",
    ]),
    ("pest control", "PC", "City Environmental Health Department", [
        "contract a licensed pest controller",
        "inspect deliveries for signs of pests",
        "seal gaps around pipes and doors",
        "keep bait stations on a numbered site plan",
        "close premises immediately after a cockroach infestation is found",
        "keep pest-control visit reports for two years",
    ]),
    ("waste disposal", "WD", "Regional Environment Agency", [
        "separate food waste from general waste",
        "use lidded bins in food rooms",
        "keep waste transfer notes for two years",
        "use a registered carrier for cooking oil",
        "empty internal bins at least daily",
        "keep the bin store clean and lockable",
    ]),
    ("working at height", "WH", "Workplace Safety Agency", [
        "assess every task done above two metres",
        "inspect ladders before each use",
        "fit guard rails to platforms and scaffolds",
        "train staff to use mobile elevating work platforms",
        "secure tools against falling",
        "stop outdoor work at height in high winds",
    ]),
    ("noise exposure", "NE", "Workplace Safety Agency", [
        "measure noise when staff must raise their voices",
        "provide hearing protection above 80 decibels",
        "mark hearing protection zones above 85 decibels",
        "offer hearing tests to exposed workers",
        "choose quieter machinery when replacing equipment",
        "limit daily exposure time near loud machines",
    ]),
    ("chemical storage", "CH", "Workplace Safety Agency", [
        "keep a safety data sheet for every hazardous product",
        "store acids and alkalis apart",
        "label decanted chemicals with their hazards",
        "provide an eyewash station near corrosive products",
        "keep chemical stores ventilated and bunded",
        "record a risk assessment for each hazardous substance",
    ]),
    ("first aid", "FA", "Workplace Safety Agency", [
        "keep a stocked first-aid kit on every site",
        "appoint a trained first aider per fifty staff",
        "record every injury in the accident book",
        "report serious injuries to the agency within ten days",
        "display the names of first aiders",
        "check first-aid kits every month",
    ]),
    ("water quality", "WQ", "Regional Environment Agency", [
        "flush little-used taps weekly to control legionella",
        "keep hot water stored above 60 °C",
        "test drinking water from private supplies yearly",
        "clean and descale shower heads every quarter",
        "keep a written legionella risk assessment",
        "use only approved fittings on drinking water pipes",
    ]),
    ("manual handling", "MH", "Workplace Safety Agency", [
        "avoid lifting loads heavier than 25 kg by hand",
        "provide trolleys or hoists for heavy deliveries",
        "train staff in safe lifting technique",
        "assess repetitive lifting tasks",
        "store heavy items between knee and shoulder height",
        "rotate staff between heavy and light tasks",
    ]),
]  # fmt: skip

DOC_KINDS = ["handbook", "inspection checklist", "compliance guide"]
# Openers end where a bare verb phrase (a duty) can follow.
CHUNK_OPENERS = {
    "handbook": ["Every employer must", "Site managers must", "Supervisors are required to",
                 "Food business operators should"],
    "inspection checklist": ["Check that staff", "Confirm that the site is able to",
                             "Ask managers to show how they", "Verify that supervisors"],
    "compliance guide": ["To comply, businesses must", "Small businesses are expected to",
                         "Contractors on site must", "Franchise operators should be able to show that they"],
}  # fmt: skip
CHUNK_TAILS = [
    ".",
    " and keep a written record.",
    "; inspectors may ask to see evidence.",
    " unless a written exemption is held.",
    ", as explained in the worked example that follows.",
    "; failing to do so is a common reason for a low rating.",
]
CHUNK_FILLERS = [
    "This {kind} explains how the {topic} rules apply to small and medium businesses.",
    "The following pages summarise what an inspector looks for in {topic}.",
    "Terms used in this {kind} are defined in the glossary at the end.",
    "Where this {kind} and the law differ, the law takes precedence.",
    "Case study: a bakery that improved its {topic} rating within three months.",
    "Questions about {topic} can be sent to the publisher's helpline.",
]
COVERAGE_TEXT = {
    "full": [
        "Explains the duty to {duty} step by step, with a worked example.",
        "Dedicates a whole section to the duty to {duty}, including common mistakes.",
    ],
    "partial": [
        "Covers the duty to {duty} in a short paragraph without examples.",
        "Discusses the duty to {duty} alongside related duties.",
    ],
    "mention": [
        "Mentions the duty to {duty} once, in passing.",
        "Lists the duty to {duty} without further detail.",
    ],
}
REVIEWERS = ["AK", "BM", "CS", "DT"]


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def build_regulations(root: Path) -> SampleWriter:
    rng = random.Random(SEED + 1)
    out = SampleWriter(root)

    # --- data model (the blank rows are what a Grist CSV export of a table with empty rows looks like) ---
    out.table(
        "model",
        "Anchors",
        [*ANCHOR_HEADER, "Raw"],
        [
            ["document", "A published guidance document (handbook, checklist or compliance guide).",
             "doc:001", "MATCH (d:document) WHERE d.document_title = 'Fire safety handbook' RETURN d",
             "#NameError"],
            ["document_chunk", "A paragraph of a document, in reading order.", "chunk:001-01",
             "MATCH (c:document_chunk)-[:DOCUMENT_CHUNK_part_of_DOCUMENT]->(d:document {id: 'doc:001'}) "
             "RETURN c.document_chunk_text ORDER BY c.document_chunk_position", "#NameError"],
            ["regulation", "A single legal duty a business must meet.", "reg:FS-01",
             "MATCH (r:regulation) WHERE r.regulation_is_binding RETURN r.id, r.regulation_title",
             "#NameError"],
            ["", "", "", "", "#NameError"],
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Anchor_attributes",
        ["anchor", *ATTR_HEADER],
        [
            attr("document", "document_id", "Node id of the document.", "doc:001", "str"),
            attr("document", "document_title", "Title printed on the cover.", "Cold storage handbook", "str",
                 True, threshold=0.5, top_n=5),
            attr("document", "document_kind", "handbook, inspection checklist or compliance guide.",
                 "handbook", "str"),
            attr("document", "document_year", "Year of publication.", "2021", "int",
                 query="MATCH (d:document) WHERE d.document_year >= 2022 RETURN d.document_title"),
            attr("document", "document_publisher", "Agency that published the document.",
                 "Workplace Safety Agency", "str"),
            attr("document_chunk", "document_chunk_id", "Node id: document number and paragraph number.",
                 "chunk:001-04", "str"),
            attr("document_chunk", "document_chunk_text", "The paragraph's text.",
                 "Supervisors must test the fire alarm every week.", "str", True,
                 "MATCH (c:document_chunk {id: $id})-[:DOCUMENT_CHUNK_part_of_DOCUMENT]->(d) RETURN d",
                 0.4, 20),
            attr("document_chunk", "document_chunk_position", "Paragraph number within the document.", "4",
                 "int"),
            attr("regulation", "regulation_id", "Node id: topic code and number.", "reg:FS-02", "str"),
            attr("regulation", "regulation_title", "Topic and the duty it imposes.",
                 "Fire safety: test the fire alarm every week", "str", True, threshold=0.45, top_n=10),
            attr("regulation", "regulation_effective_date", "Date the duty came into force.", "2019-01-01",
                 "date"),
            attr("regulation", "regulation_is_binding", "false for recommended good practice.", "true",
                 "bool"),
            attr("regulation", "regulation_max_fine_eur", "Highest fine for a breach, in euros.", "2500.0",
                 "float", query="MATCH (r:regulation) RETURN r.id ORDER BY r.regulation_max_fine_eur DESC"),
            ["", "", "", "", False, "", "", None, None],
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Links",
        LINK_HEADER,
        [
            ["document_chunk", "document", "DOCUMENT_CHUNK_part_of_DOCUMENT",
             "The paragraph belongs to the document (the document_chunk_document Ref column).",
             "MATCH (c:document_chunk)-[:DOCUMENT_CHUNK_part_of_DOCUMENT]->(d:document) RETURN d, count(c)",
             "document_chunk_document", "", True],
            ["regulation", "document_chunk", "REGULATION_has_DOCUMENT_CHUNK",
             "The paragraph states or explains the regulation (the regulation_document_chunks RefList "
             "column). Undirected.",
             "MATCH (r:regulation {id: $id})-[:REGULATION_has_DOCUMENT_CHUNK]-(c) RETURN c.document_chunk_text",
             "regulation_document_chunks", "", False],
            ["document", "regulation", "DOCUMENT_covers_REGULATION",
             "The document covers the regulation; the edge says how (Link_document_covers_regulation).",
             "MATCH (d:document)-[r:DOCUMENT_covers_REGULATION]->(g:regulation) "
             "RETURN d.document_title, r.coverage_level, g.regulation_title",
             "", "", True],
            ["regulation", "regulation", "REGULATION_amends_REGULATION",
             "The first regulation amends the second, older one (Link_regulation_amends_regulation).",
             "MATCH (new:regulation)-[:REGULATION_amends_REGULATION]->(old:regulation) RETURN new.id, old.id",
             "", "", True],
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Link_attributes",
        ["link", *ATTR_HEADER],
        [
            attr("DOCUMENT_covers_REGULATION", "coverage", "How the document covers the regulation.",
                 "Explains the duty step by step with a worked example.", "str", True,
                 threshold=0.45, top_n=10),
            attr("DOCUMENT_covers_REGULATION", "coverage_level", "full, partial or mention.", "full", "str"),
            attr("DOCUMENT_covers_REGULATION", "section_count", "Paragraphs of the document about the duty.",
                 "3", "int"),
            attr("DOCUMENT_covers_REGULATION", "verified", "Whether a reviewer checked the coverage.",
                 "true", "bool"),
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Queries",
        ["query_name", "query_example"],
        [
            ["Which documents explain <duty> in detail?",
             "1) vector_text_search(label=\"regulation\", property=\"regulation_title\", text=\"<duty>\").\n"
             "2) MATCH (d:document)-[c:DOCUMENT_covers_REGULATION {coverage_level: 'full'}]->"
             "(r:regulation {id: $id}) RETURN d.document_title, c.coverage"],
            ["Where is <topic> described?",
             "1) vector_text_search(label=\"document_chunk\", property=\"document_chunk_text\", "
             "text=\"<topic>\").\n"
             "2) MATCH (c:document_chunk {id: $id})-[:DOCUMENT_CHUNK_part_of_DOCUMENT]->(d:document) "
             "RETURN d.document_title, c.document_chunk_position"],
            ["Which paragraphs support regulation <code>?",
             "MATCH (r:regulation {id: $code})-[:REGULATION_has_DOCUMENT_CHUNK]-(c:document_chunk) "
             "RETURN c.id, c.document_chunk_text ORDER BY c.id"],
            ["What does <regulation> amend?",
             "MATCH (r:regulation {id: $code})-[:REGULATION_amends_REGULATION*1..3]->(old:regulation) "
             "RETURN old.id, old.regulation_title"],
            ["", ""],
        ],
    )  # fmt: skip
    out.table(
        "model",
        "Prompts",
        ["name", "text"],
        [
            ["no_answer",
             "No matching regulation or document was found. Try quoting a duty (for example "
             "\"test the fire alarm\") or a regulation code such as reg:FS-02."],
        ],
    )  # fmt: skip

    # --- data ---
    doc_rows: list[list[object]] = []
    chunk_rows: list[list[object]] = []
    reg_rows: list[list[object]] = []
    cover_rows: list[list[object]] = []
    amend_rows: list[list[object]] = []
    chunks_by_reg: dict[str, list[str]] = {}
    reg_dates: dict[str, date] = {}

    for _topic, code, _publisher, duties in TOPICS:
        for d in range(1, len(duties) + 1):
            rid = f"reg:{code}-{d:02d}"
            chunks_by_reg[rid] = []
            reg_dates[rid] = date(2012, 1, 1) + timedelta(days=rng.randrange(0, 4400))

    doc_number = 0
    for topic, code, publisher, duties in TOPICS:
        for kind in DOC_KINDS:
            doc_number += 1
            did = f"doc:{doc_number:03d}"
            year: object = rng.randint(2016, 2024)
            if doc_number == 9:
                year = "#NameError"  # a formula that failed in Grist: must be read as empty
            note = "scanned copy, check page order" if rng.random() < 0.3 else ""
            doc_rows.append([did, f"{capitalised(topic)} {kind}", kind, year, publisher, note])
            mentions: Counter[str] = Counter()
            for pos in range(1, rng.randint(10, 20) + 1):
                cid = f"chunk:{doc_number:03d}-{pos:02d}"
                if pos == 1 or rng.random() < 0.2:
                    text = rng.choice(CHUNK_FILLERS).format(kind=kind, topic=topic)
                else:
                    d = rng.randrange(len(duties))
                    rid = f"reg:{code}-{d + 1:02d}"
                    text = f"{rng.choice(CHUNK_OPENERS[kind])} {duties[d]}{rng.choice(CHUNK_TAILS)}"
                    chunks_by_reg[rid].append(cid)
                    mentions[rid] += 1
                chunk_rows.append([cid, text, pos, did])
            for rid, n in sorted(mentions.items()):
                level = "full" if n >= 3 else "partial" if n == 2 else "mention"
                duty = duties[int(rid[-2:]) - 1]
                coverage = rng.choice(COVERAGE_TEXT[level]).format(duty=duty)
                reviewer = rng.choice(REVIEWERS) if rng.random() < 0.5 else ""
                cover_rows.append([did, rid, "DOCUMENT_covers_REGULATION", coverage, level, n,
                                   rng.random() < 0.7, reviewer])  # fmt: skip

    # Quirk: a second row with an existing document id; the first row wins, this one is not loaded.
    doc_rows.insert(12, ["doc:007", "Fire safety handbook (draft copy)", "handbook", 2015,
                         "Fire and Rescue Authority", "superseded draft, kept for reference"])  # fmt: skip
    # Quirk: the same (from, to) pair twice (collapses to one edge) and an edge to a regulation that
    # does not exist (dropped as dangling).
    cover_rows.insert(5, [*cover_rows[2][:3], "Repeated row entered by a second reviewer.", "partial", 1,
                          False, "DT"])  # fmt: skip
    cover_rows.append(["doc:004", "reg:AL-99", "DOCUMENT_covers_REGULATION",
                       "Refers to a withdrawn allergen rule.", "mention", 1, False, "AK"])  # fmt: skip

    for topic, code, _publisher, duties in TOPICS:
        for d, duty in enumerate(duties, start=1):
            rid = f"reg:{code}-{d:02d}"
            fine = float(rng.choice([250, 500, 1000, 2500, 5000, 10000, 20000]))
            binding = rng.random() < 0.8
            reg_rows.append([rid, f"{capitalised(topic)}: {duty}", reg_dates[rid], binding, fine,
                             chunks_by_reg[rid][:15]])  # fmt: skip
        # Each topic has one or two amendments: a newer regulation amends an older one.
        for _ in range(rng.randint(1, 2)):
            a, b = rng.sample(range(1, len(duties) + 1), 2)
            newer, older = sorted((f"reg:{code}-{a:02d}", f"reg:{code}-{b:02d}"), key=reg_dates.__getitem__,
                                  reverse=True)  # fmt: skip
            amend_rows.append([newer, older, "REGULATION_amends_REGULATION"])

    out.table(
        "data",
        "Anchor_document",
        ["document_id", "document_title", "document_kind", "document_year", "document_publisher",
         "document_internal_note"],
        doc_rows,
    )  # fmt: skip
    out.table(
        "data",
        "Anchor_document_chunk",
        ["document_chunk_id", "document_chunk_text", "document_chunk_position", "document_chunk_document"],
        chunk_rows,
    )
    out.table(
        "data",
        "Anchor_regulation",
        ["regulation_id", "regulation_title", "regulation_effective_date", "regulation_is_binding",
         "regulation_max_fine_eur", "regulation_document_chunks"],
        reg_rows,
    )  # fmt: skip
    out.table(
        "data",
        "Link_document_covers_regulation",
        ["from_node_id", "to_node_id", "edge_label", "coverage", "coverage_level", "section_count",
         "verified", "reviewer"],
        cover_rows,
    )  # fmt: skip
    out.table(
        "data",
        "Link_regulation_amends_regulation",
        ["from_node_id", "to_node_id", "edge_label"],
        sorted({tuple(r): r for r in amend_rows}.values()),
    )
    out.table(
        "data",
        "Notes",
        ["note", "author"],
        [
            ["Not data: tables without the Anchor_/Link_ prefix are ignored by sync.", "AK"],
            ["Re-check reg:FS-02 after the 2024 fire code update.", "BM"],
        ],
    )
    return out


# --------------------------------------------------------------------------------------------
# Expected counts: re-read the CSV folder and apply DESIGN.md §4, independently of the generator
# --------------------------------------------------------------------------------------------

# Grist writes a failed formula's cell as `#NameError`, `#TypeError`, ...: read as empty.
ERROR_CELL = re.compile(r"^#[A-Za-z]*Error$")


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def cell(row: dict[str, str], column: str) -> str:
    value = (row.get(column) or "").strip()
    return "" if ERROR_CELL.match(value) else value


def truthy(value: str) -> bool:
    return value.strip().lower() == "true"


Pair = tuple[str, str, dict[str, str]]


def link_pairs(
    lk: dict[str, str],
    node_rows: dict[str, dict[str, dict[str, str]]],
    link_files: dict[str, Path],
    link_described: dict[str, set[str]],
    undescribed: dict[str, list[str]],
) -> list[Pair]:
    """A link's (from, to, source row) pairs: its anchor1 link column's targets, then its link
    table's rows (whose columns the data model does not describe go to `undescribed`)."""
    sentence, a1, a2 = lk["sentence"], lk["anchor1"], lk["anchor2"]
    pairs: list[Pair] = []
    column = lk["anchor1_link_column_name"].strip()
    if column:
        for nid, r in node_rows[a1].items():
            pairs += [(nid, target.strip(), {}) for target in cell(r, column).split(",") if target.strip()]
    table = link_files.get(sentence.lower()) or link_files.get(f"{a1}_{a2}".lower())
    if table is not None:
        rows = read_csv(table)
        pairs += [(cell(r, "from_node_id"), cell(r, "to_node_id"), r) for r in rows]
        known = {"from_node_id", "to_node_id", "edge_label", *link_described.get(sentence, ())}
        extra = [c for c in (rows[0].keys() if rows else []) if c not in known]
        if extra:
            undescribed[table.stem] = extra
    return pairs


def link_edges(
    lk: dict[str, str], pairs: list[Pair], node_rows: dict[str, dict[str, dict[str, str]]]
) -> tuple[dict[tuple[str, str], dict[str, str]], int, int]:
    """The link's edges ((from, to) -> first source row; both ways when undirected), and how
    many pairs dangled and how many collapsed into an edge already made."""
    a1, a2 = lk["anchor1"], lk["anchor2"]
    found: dict[tuple[str, str], dict[str, str]] = {}
    dangling = collapsed = 0
    undirected = not truthy(lk["has_direction"])
    for src, dst, r in pairs:
        if src not in node_rows[a1] or dst not in node_rows[a2]:
            dangling += 1
            continue
        keys = [(src, dst), (dst, src)] if undirected else [(src, dst)]
        if keys[0] in found:
            collapsed += 1
        for key in keys:
            found.setdefault(key, r)
    return found, dangling, collapsed


def expected_counts(sample: Path) -> dict[str, object]:
    model, data = sample / "model", sample / "data"
    anchors = [r["noun"].strip() for r in read_csv(model / "Anchors.csv") if r["noun"].strip()]
    described: dict[str, set[str]] = {a: set() for a in anchors}
    embeddable_nodes: list[tuple[str, str]] = []
    for r in read_csv(model / "Anchor_attributes.csv"):
        if r["anchor"].strip() and r["attribute_name"].strip():
            described[r["anchor"]].add(r["attribute_name"])
            if truthy(r["embeddable"]):
                embeddable_nodes.append((r["anchor"], r["attribute_name"]))
    links = [r for r in read_csv(model / "Links.csv") if r["sentence"].strip()]
    link_described: dict[str, set[str]] = {}
    embeddable_edges: list[tuple[str, str]] = []
    for r in read_csv(model / "Link_attributes.csv"):
        if r["link"].strip() and r["attribute_name"].strip():
            link_described.setdefault(r["link"], set()).add(r["attribute_name"])
            if truthy(r["embeddable"]):
                embeddable_edges.append((r["link"], r["attribute_name"]))

    # Nodes: first row per id wins; rows without an id would be skipped.
    node_rows: dict[str, dict[str, dict[str, str]]] = {}
    duplicates: dict[str, int] = {}
    undescribed: dict[str, list[str]] = {}
    for noun in anchors:
        rows = read_csv(data / f"Anchor_{noun}.csv")
        kept: dict[str, dict[str, str]] = {}
        for r in rows:
            nid = cell(r, f"{noun}_id")
            if nid and nid not in kept:
                kept[nid] = r
        node_rows[noun] = kept
        duplicates[noun] = sum(1 for r in rows if cell(r, f"{noun}_id")) - len(kept)
        link_columns = {lk["anchor1_link_column_name"] for lk in links if lk["anchor1"] == noun}
        columns = list(rows[0].keys()) if rows else []
        extra = [c for c in columns if c not in described[noun] and c not in link_columns]
        if extra:
            undescribed[f"Anchor_{noun}"] = extra

    # Edges: (from, to) -> first source row, per link sentence.
    edges: dict[str, dict[tuple[str, str], dict[str, str]]] = {}
    dangling: dict[str, int] = {}
    collapsed: dict[str, int] = {}
    link_files = {p.stem[len("Link_") :].lower(): p for p in data.glob("Link_*.csv")}
    for lk in links:
        sentence = lk["sentence"]
        pairs = link_pairs(lk, node_rows, link_files, link_described, undescribed)
        edges[sentence], dangling[sentence], collapsed[sentence] = link_edges(lk, pairs, node_rows)

    texts: dict[str, list[str]] = {}
    for noun, name in embeddable_nodes:
        texts[f"{noun}.{name}"] = [cell(r, name) for r in node_rows[noun].values() if cell(r, name)]
    for sentence, name in embeddable_edges:
        texts[f"{sentence}.{name}"] = [cell(r, name) for r in edges[sentence].values() if cell(r, name)]
    return {
        "nodes": {noun: len(rows) for noun, rows in node_rows.items()},
        "edges": {sentence: len(found) for sentence, found in edges.items()},
        # Non-empty values of embeddable attributes on loaded nodes / edges (an undirected link's
        # edge counts in both directions), and how many distinct texts those are.
        "embeddable_values": {key: len(values) for key, values in texts.items()},
        "embeddable_distinct_texts": {key: len(set(values)) for key, values in texts.items()},
        "dropped": {
            "duplicate_node_ids": {k: v for k, v in duplicates.items() if v},
            "dangling_edges": {k: v for k, v in dangling.items() if v},
            "duplicate_edges_collapsed": {k: v for k, v in collapsed.items() if v},
            "ignored_tables": sorted(
                p.name for p in data.glob("*.csv") if not p.name.startswith(("Anchor_", "Link_"))
            ),
            "undescribed_columns": undescribed,
        },
    }


def interest_degree_summary(writer: SampleWriter) -> dict[str, int]:
    rows = csv.DictReader(io.StringIO(writer.files["data/Link_person_has_interest.csv"]))
    per_person = Counter(r["from_node_id"] for r in rows)
    return {
        "people_with_10_or_more_interests": sum(1 for n in per_person.values() if n >= 10),
        "max_interests_of_one_person": max(per_person.values()),
    }


README_BEGIN = "<!-- expected counts: written by make_samples.py -->"
README_END = "<!-- end of expected counts -->"


def counts_markdown(name: str, counts: dict) -> str:
    """The README's table of one sample's expected counts."""
    lines = [f"`{name}/`", "", "| label | nodes |", "|---|---|"]
    lines += [f"| `{label}` | {n:,} |" for label, n in counts["nodes"].items()]
    lines += ["", "| edge type | edges |", "|---|---|"]
    lines += [f"| `{sentence}` | {n:,} |" for sentence, n in counts["edges"].items()]
    lines += ["", "| embeddable attribute | values | distinct texts |", "|---|---|---|"]
    distinct = counts["embeddable_distinct_texts"]
    lines += [f"| `{key}` | {n:,} | {distinct[key]:,} |" for key, n in counts["embeddable_values"].items()]
    dropped = counts["dropped"]
    notes = [f"{n} duplicate `{label}` id" for label, n in dropped["duplicate_node_ids"].items()]
    notes += [f"{n} dangling `{s}` edge" for s, n in dropped["dangling_edges"].items()]
    notes += [f"{n} duplicate `{s}` edge collapsed" for s, n in dropped["duplicate_edges_collapsed"].items()]
    notes += [f"`{t}` ignored" for t in dropped["ignored_tables"]]
    notes += [f"`{t}.{c}` undescribed" for t, cols in dropped["undescribed_columns"].items() for c in cols]
    lines += ["", "Dropped: " + ("; ".join(notes) if notes else "nothing") + "."]
    return "\n".join(lines)


def readme_with_counts(readme: str, all_counts: dict[str, dict]) -> str:
    head, rest = readme.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    body = "\n\n".join(counts_markdown(name, counts) for name, counts in all_counts.items())
    return f"{head}{README_BEGIN}\n{body}\n{README_END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the samples into")
    parser.add_argument("--check", action="store_true", help="only verify the files are up to date")
    args = parser.parse_args(argv)

    samples = {"people": build_people, "regulations": build_regulations}
    stale: list[str] = []
    all_counts: dict[str, dict] = {}
    for name, build in samples.items():
        writer = build(args.out / name)
        if args.check:
            stale += writer.differences()
            with tempfile.TemporaryDirectory() as tmp:
                build(Path(tmp)).write()
                counts = expected_counts(Path(tmp))
        else:
            writer.write()
            counts = expected_counts(args.out / name)
        if name == "people":
            counts["shape"] = interest_degree_summary(writer)
        all_counts[name] = counts
        text = json.dumps(counts, indent=2, ensure_ascii=False) + "\n"
        expected_path = args.out / name / "expected.json"
        if args.check:
            if not expected_path.exists() or expected_path.read_text(encoding="utf-8") != text:
                stale.append(str(expected_path))
        else:
            expected_path.write_text(text, encoding="utf-8")
            print(f"== {name}\n{text}")

    readme_path = args.out / "README.md"
    if readme_path.exists():
        readme = readme_with_counts(readme_path.read_text(encoding="utf-8"), all_counts)
        if args.check:
            if readme != readme_path.read_text(encoding="utf-8"):
                stale.append(str(readme_path))
        else:
            readme_path.write_text(readme, encoding="utf-8")
    if stale:
        print("out of date (run samples/make_samples.py):", *stale, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
