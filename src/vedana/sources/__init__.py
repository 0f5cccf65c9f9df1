"""Where sync reads from: one module per kind of source, all yielding the same `RawTable`s.

`open_source` picks the kind from what it is given: a folder → CSV folder, a `*.grist` file →
the backup file, anything else → a document id on the configured Grist server (read over the
REST API, or through its CSV export with `csv=True`); nothing → the configured document id.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from vedana.errors import ConfigError, SourceError
from vedana.sources.base import CELL_ERROR, Column, RawTable, Ref, Source, is_helper_column

if TYPE_CHECKING:
    from vedana.config import Settings

__all__ = [
    "CELL_ERROR",
    "Column",
    "RawTable",
    "Ref",
    "Source",
    "is_helper_column",
    "open_source",
]

Role = Literal["data_model", "data"]
_SETTING = {"data_model": "GRIST_DATA_MODEL_DOC_ID", "data": "GRIST_DATA_DOC_ID"}
_FLAG = {"data_model": "--data-model", "data": "--data"}


def open_source(
    spec: str | Path | Source | None, *, role: Role, settings: Settings, csv: bool = False
) -> Source:
    if spec is not None and not isinstance(spec, str | Path):
        return spec  # an already built source (tests, the benchmark)
    if spec is None:
        doc_id = settings.grist_data_model_doc_id if role == "data_model" else settings.grist_data_doc_id
        if not doc_id:
            raise ConfigError(
                f"no {role.replace('_', ' ')} source: pass {_FLAG[role]} (a folder, a .grist file "
                f"or a document id) or set {_SETTING[role]} and GRIST_SERVER_URL"
            )
        return _server_source(doc_id, role=role, settings=settings, csv=csv)
    path = Path(spec).expanduser()
    if path.is_dir():
        from vedana.sources.csv_folder import CsvFolderSource

        return CsvFolderSource(path)
    if path.suffix.lower() == ".grist":
        from vedana.sources.grist_file import GristFileSource

        return GristFileSource(path)
    text = str(spec)
    if path.exists() or "/" in text or "\\" in text or path.suffix.lower() == ".csv":
        raise SourceError(
            f"{text} is neither a folder of CSV files nor a .grist file; "
            f"pass one of those, or a Grist document id, to {_FLAG[role]}"
        )
    return _server_source(text, role=role, settings=settings, csv=csv)


def _server_source(doc_id: str, *, role: Role, settings: Settings, csv: bool) -> Source:
    from vedana.sources.grist_api import GristApiSource
    from vedana.sources.grist_csv import GristCsvSource
    from vedana.sources.grist_http import GristClient

    if not settings.grist_server_url:
        raise ConfigError(f"set GRIST_SERVER_URL to read Grist document {doc_id!r}")
    key = settings.grist_api_key.get_secret_value() if settings.grist_api_key else None
    client = GristClient(
        settings.grist_server_url,
        doc_id,
        key,
        timeout_s=settings.grist_timeout_s,
        deadline_s=settings.grist_deadline_s,
    )
    if csv:
        return GristCsvSource(client)
    # The Data Model's tables are small: one /records call each. Data tables are paged via /sql.
    return GristApiSource(client, rows_via="records" if role == "data_model" else "sql")
