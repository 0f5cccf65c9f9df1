"""The golden set: table `Gds` of a Grist document (over the API, its CSV export or a `.grist`
backup), a folder of CSV files, or one CSV file. Columns `gds_question` and `gds_answer` are
required; `question_context`, `question_comment`, `question_scenario` are optional; any other
column is kept as metadata."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vedana.errors import ConfigError, SourceError

if TYPE_CHECKING:
    from vedana.config import Settings

TABLE = "Gds"
QUESTION, ANSWER = "gds_question", "gds_answer"
CONTEXT, COMMENT, SCENARIO = "question_context", "question_comment", "question_scenario"
_KNOWN = {QUESTION, ANSWER, CONTEXT, COMMENT, SCENARIO}


@dataclass(frozen=True)
class GoldenQuestion:
    position: int  # 1-based place in the golden set: a question's identity across runs
    question: str
    answer: str
    context: str = ""
    comment: str = ""
    scenario: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _rows_to_questions(where: str, columns: list[str], rows: list[dict[str, Any]]) -> list[GoldenQuestion]:
    missing = [c for c in (QUESTION, ANSWER) if c not in columns]
    if missing:
        raise SourceError(
            f"table {TABLE} of {where} has no column {' or '.join(missing)}; columns found: {', '.join(columns) or 'none'}"
        )
    questions = []
    for position, row in enumerate(rows, start=1):
        question = _text(row.get(QUESTION))
        if not question:
            continue  # a blank row
        questions.append(
            GoldenQuestion(
                position=position,
                question=question,
                answer=_text(row.get(ANSWER)),
                context=_text(row.get(CONTEXT)),
                comment=_text(row.get(COMMENT)),
                scenario=_text(row.get(SCENARIO)),
                metadata={k: v for k, v in row.items() if k not in _KNOWN and v not in (None, "")},
            )
        )
    return questions


def read_golden(
    spec: str | Path | None, settings: Settings, *, csv_export: bool = False
) -> tuple[list[GoldenQuestion], str]:
    """The golden questions and where they came from. `spec`: a CSV file, a folder of CSV files,
    a `.grist` file or a Grist document id; None means `GRIST_TEST_SET_DOC_ID`."""
    if spec is None:
        if not settings.grist_test_set_doc_id:
            raise ConfigError("no golden set: pass --golden (a CSV file, a folder, a .grist file or a document id) "
                              "or set GRIST_TEST_SET_DOC_ID")  # fmt: skip
        spec = settings.grist_test_set_doc_id
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".csv":
        if not path.is_file():
            raise SourceError(f"no such golden-set file: {path}; check --golden")
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            return _rows_to_questions(str(path), list(reader.fieldnames or []), rows), str(path)
    from vedana.sources import is_helper_column, open_source

    source = open_source(spec, role="data", settings=settings, csv=csv_export)
    try:
        names = {n.lower(): n for n in source.table_names()}
        if TABLE.lower() not in names:
            raise SourceError(
                f"{source.describe()} has no table {TABLE}; tables found: {', '.join(sorted(names.values())) or 'none'}"
            )
        table = source.table(names[TABLE.lower()])
        assert table is not None
        columns = [c for c in table.columns if not is_helper_column(c)]  # not Grist's own (manualSort, …)
        rows = [{k: v for k, v in cells.items() if not is_helper_column(k)} for _, cells in table.rows()]
        return _rows_to_questions(source.describe(), columns, rows), source.describe()
    finally:
        source.close()


def select(
    questions: list[GoldenQuestion], *, scenarios: list[str] | None = None, limit: int | None = None,
    question: str | None = None,
) -> list[GoldenQuestion]:  # fmt: skip
    """The subset a run asks: by scenario (any of), by question text (contains, any case), first N."""
    chosen = questions
    if scenarios:
        wanted = {s.casefold() for s in scenarios}
        chosen = [q for q in chosen if q.scenario.casefold() in wanted]
    if question:
        chosen = [q for q in chosen if question.casefold() in q.question.casefold()]
    return chosen[:limit] if limit else chosen
