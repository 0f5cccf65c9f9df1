"""A sync from the Grist API fetches only what changed since the last one.

Before the staging transaction, the kept copy of the data document (`stores/grist_mirror.py`) is
brought up to date and committed:

- **changes**: the copy stands for a state still in the document's history and the document kept
  its shape, so Grist's own summary of the actions since then (`/compare`) names the rows to fetch
  again and the rows to drop;
- **full read**: otherwise (first sync, `--full`, another document, history too short, tables or
  columns changed), every row is downloaded and the copy rebuilt.

The normaliser then reads every table from the copy, so all the rules that relate rows to one
another (references, duplicate ids, dangling ends) still see the whole document.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vedana.etl.normalize import ANCHOR_PREFIX, LINK_PREFIX
from vedana.etl.report import GristFetch
from vedana.sources.base import RawTable
from vedana.sources.findings import SourceFindings
from vedana.sources.grist_api import GristApiSource

if TYPE_CHECKING:
    from sqlalchemy import Engine


class MirroredSource:
    """The API source, with every data table's rows read from the kept copy."""

    def __init__(self, api: GristApiSource, engine: Engine, key: str) -> None:
        self.api = api
        self.kind = api.kind
        self._engine = engine
        self._key = key

    @property
    def findings(self) -> SourceFindings:
        # NUL characters are removed as rows are fetched, before they are kept.
        return self.api.findings

    def describe(self) -> str:
        return self.api.describe()

    def table_names(self) -> list[str]:
        return self.api.table_names()

    def table(self, name: str) -> RawTable | None:
        from vedana.stores.grist_mirror import count_records, read_records

        if name not in self.table_names():
            return None
        engine, key = self._engine, self._key

        def records() -> Iterator[dict[str, Any]]:
            return read_records(engine, key, name)

        return self.api.table_of_records(name, records, count_records(engine, key, name))

    def state(self) -> str | None:
        return self.api.state()

    def close(self) -> None:
        self.api.close()


def mirror_key(api: GristApiSource) -> str:
    return f"{api.client.server}/{api.client.doc_id}"


def refresh_mirror(engine: Engine, api: GristApiSource, *, full: bool) -> tuple[MirroredSource, GristFetch]:
    """Bring the kept copy up to date (and commit it); returns the source reading from it."""
    from vedana.stores.grist_mirror import (
        apply_changes,
        clear_mirror,
        copy_records,
        drop_tables,
        kept_tables,
        mirror_state,
        set_mirror_state,
    )

    key = mirror_key(api)
    before = api.rows_fetched
    with engine.begin() as conn:
        state = mirror_state(conn, key)
        changes: Any = "--full" if full else "first read of this document" if state is None else None
        if changes is None:
            assert state is not None
            changes = api.changes_since(state)
        # Only Anchor_/Link_ tables can hold data (`normalize.plan_tables`); the rest is not kept.
        tables = [t for t in api.table_names() if t.startswith((ANCHOR_PREFIX, LINK_PREFIX))]
        if not isinstance(changes, str):
            changes.tables = {
                t: d for t, d in changes.tables.items() if t.startswith((ANCHOR_PREFIX, LINK_PREFIX))
            }
            if set(changes.tables) - set(tables):
                changes = "tables were added or removed"
        if isinstance(changes, str):
            head = api.state()
            clear_mirror(conn)
            for name in tables:
                copy_records(conn, key, name, api.raw_records(name))
            set_mirror_state(conn, key, head)
            fetch = GristFetch("full", changes)
        else:
            drop_tables(conn, key, kept_tables(conn, key) - set(tables))
            for name, delta in changes.tables.items():
                records = api.raw_records_by_id(name, delta.fetch) if delta.fetch else iter(())
                apply_changes(conn, key, name, delta.removed, records)
            set_mirror_state(conn, key, changes.head)
            fetch = GristFetch("changes", f"{changes.rows} row change(s)", tables_changed=len(changes.tables))
    fetch.rows_fetched = api.rows_fetched - before
    return MirroredSource(api, engine, key), fetch
