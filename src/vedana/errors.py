"""Errors the user can act on. Each message is one sentence that names the fix.

The CLI prints `str(error)` on one line and exits with `exit_code`; other exceptions are bugs
and show a traceback only with `--debug` / `VEDANA_DEBUG=1`.
"""

from __future__ import annotations


class VedanaError(Exception):
    """Base class: something the user can fix. Printed as one line, exit code 1."""

    exit_code = 1


class ConfigError(VedanaError):
    """Missing or invalid configuration (exit code 2, like a usage error)."""

    exit_code = 2


class ServiceError(VedanaError):
    """An embedded or external service could not be started or reached."""


class NotSynced(VedanaError):
    def __init__(self, message: str = "no data model found; run `vedana sync` first") -> None:
        super().__init__(message)


class NotIndexed(VedanaError):
    def __init__(self, message: str = "nothing is indexed yet; run `vedana index` first") -> None:
        super().__init__(message)


class SourceError(VedanaError):
    """Bad input data: a missing table, an unreadable file, a malformed row."""


class DeletionRefused(SourceError):
    """A sync would delete a whole type, or too much of one: nothing was written."""


class GristError(SourceError):
    """The Grist server refused or failed a request."""

    status: int | None = None  # the HTTP status of Grist's answer, when it answered


class GristAuthError(GristError):
    """401/403 from Grist."""


class GristNotFound(GristError):
    """404 from Grist: unknown document or table."""


class EmbeddingError(VedanaError):
    """The embedding model failed or returned vectors of the wrong dimension."""


class CypherError(VedanaError):
    """A Cypher query failed in the engine."""


class CypherWriteRefused(CypherError):
    """A Cypher query that could write was refused before it ran."""


class CypherSchemaMismatch(CypherError):
    """A Cypher query named a label, relationship type or property the graph does not have, or
    drew a relationship against its direction; refused before it ran."""


class LLMError(VedanaError):
    """The language model is not configured or failed."""


class LockBusy(VedanaError):
    """Another vedana run holds the lock."""

    exit_code = 75  # EX_TEMPFAIL: cron may simply try again next time


class UnknownThread(VedanaError):
    """A conversation thread id that is not stored."""
