"""Options several commands share, defined once so a flag means the same thing everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

DataModelSource = Annotated[
    str | None,
    typer.Option(
        "--data-model",
        metavar="PATH|DOC",
        help="Data Model source: a folder of CSV files, a .grist file, or a Grist document id "
        "(default: GRIST_DATA_MODEL_DOC_ID).",
        show_default=False,
    ),
]
DataSource = Annotated[
    str | None,
    typer.Option(
        "--data",
        metavar="PATH|DOC",
        help="Data source: a folder of CSV files, a .grist file, or a Grist document id "
        "(default: GRIST_DATA_DOC_ID).",
        show_default=False,
    ),
]
CsvExport = Annotated[
    bool, typer.Option("--csv", help="Read Grist documents through their CSV export, not the REST API.")
]
Strict = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Fail, writing nothing, when a source needed repair (NUL characters removed) or had "
        "malformed CSV rows skipped; without it those are warnings.",
    ),
]
AllowDeletions = Annotated[
    bool,
    typer.Option(
        "--allow-deletions",
        help="Let the sync delete what it otherwise refuses to: every row of a type whose table or id "
        "column is missing from the data, or more than VEDANA_MAX_DELETE_SHARE of a type's rows.",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON (the library's report).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary; errors only.")]
