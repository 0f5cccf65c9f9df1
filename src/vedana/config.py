"""Settings from the environment, a `.env` file in the working directory, and CLI flags.

Names follow the reference deployment so an existing `.env` keeps working; settings new to
vedana carry a `VEDANA_` prefix. Nothing is read at import time: call `get_settings()`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from vedana.errors import ConfigError

DEFAULT_EMBEDDINGS_MODEL = "all-MiniLM-L6-v2"
DEFAULT_EMBEDDINGS_DIM = 384


def default_query_memory_mb() -> int:
    """An eighth of the machine's memory, at most 1 GiB: one runaway query cannot take the
    machine, and ordinary reads and index batches stay far below it."""
    import os

    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1024
    return max(64, min(1024, total // 8 // (1024 * 1024)))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        populate_by_name=True,
    )

    # Grist
    grist_server_url: str | None = None
    grist_api_key: SecretStr | None = None
    grist_data_model_doc_id: str | None = None
    grist_data_doc_id: str | None = None
    grist_test_set_doc_id: str | None = None
    # Each request may take GRIST_TIMEOUT_S (connect and read); one operation, retries and
    # waits included, GRIST_DEADLINE_S: a server that never answers fails in about that.
    grist_timeout_s: float = Field(default=20.0, gt=0)
    grist_deadline_s: float = Field(default=45.0, gt=0)

    # A sync fails rather than delete more than this share of a type's rows (when over the floor's
    # count of rows); `--allow-deletions` lets it through.
    max_delete_share: float = Field(
        default=0.5, ge=0, le=1, validation_alias=AliasChoices("VEDANA_MAX_DELETE_SHARE")
    )
    max_delete_floor: int = Field(default=10, ge=0, validation_alias=AliasChoices("VEDANA_MAX_DELETE_FLOOR"))

    # Storage; unset means the embedded services under vedana_home.
    db_conn_uri: SecretStr | None = None
    memgraph_uri: str | None = None
    memgraph_user: str | None = None
    memgraph_pwd: SecretStr | None = None
    vedana_home: Path = Path(".vedana")

    # Models
    model: str = "gpt-4.1-mini"
    filter_model: str | None = None
    judge_model: str | None = None  # `vedana eval`'s judge; unset: MODEL
    enable_dm_filtering: bool = True
    embeddings_model: str = DEFAULT_EMBEDDINGS_MODEL
    embeddings_dim: int | None = None
    embeddings_threshold: float | None = None
    embeddings_top_n: int = 10
    # The warm local-model service stops after this many idle seconds; 0 loads the model in-process.
    vedana_model_idle_s: float = 900.0
    # Base URL for an OpenAI-compatible provider (also read as OPENAI_API_BASE by litellm itself).
    llm_api_base: str | None = Field(
        default=None, validation_alias=AliasChoices("VEDANA_LLM_API_BASE", "LLM_API_BASE")
    )
    embeddings_api_base: str | None = Field(
        default=None, validation_alias=AliasChoices("VEDANA_EMBEDDINGS_API_BASE", "EMBEDDINGS_API_BASE")
    )
    # A remote embedding model: per request, and per batch with its retries.
    embeddings_timeout_s: float = Field(default=60.0, gt=0)
    embeddings_deadline_s: float = Field(default=180.0, gt=0)

    # Agent
    cypher_rows_limit: int = 200
    cypher_timeout_s: float = 10.0
    # Memory one query may use on the embedded FalkorDB (its QUERY_MEM_CAPACITY), in MB.
    graph_query_memory_mb: int = Field(default_factory=default_query_memory_mb, gt=0)
    pipeline_history_length: int = 20
    agent_max_rounds: int = Field(default=5, validation_alias=AliasChoices("VEDANA_AGENT_MAX_ROUNDS"))
    # Cypher (agent, `vedana cypher`, MCP) naming a label, type or property the data model lacks
    # is refused before it runs, with the closest real names.
    cypher_schema_check: bool = Field(
        default=True, validation_alias=AliasChoices("VEDANA_CYPHER_SCHEMA_CHECK")
    )
    # A tool result longer than this many tokens (estimated: UTF-8 bytes / 4) keeps its first rows.
    tool_result_max_tokens: int = Field(
        default=10_000, ge=200, validation_alias=AliasChoices("VEDANA_TOOL_RESULT_MAX_TOKENS")
    )

    # `vedana mcp --http`: the bearer token clients must send (required off loopback).
    mcp_token: SecretStr | None = Field(default=None, validation_alias=AliasChoices("VEDANA_MCP_TOKEN"))

    debug: bool = Field(default=False, validation_alias=AliasChoices("VEDANA_DEBUG"))

    @property
    def effective_filter_model(self) -> str:
        return self.filter_model or self.model

    @property
    def uses_embedded_postgres(self) -> bool:
        return self.db_conn_uri is None or not self.db_conn_uri.get_secret_value()

    @property
    def uses_embedded_graph(self) -> bool:
        return not self.memgraph_uri

    @property
    def home(self) -> Path:
        return self.vedana_home.expanduser().resolve()

    def secrets(self) -> list[str]:
        """Every secret value currently configured, for redaction: keys, passwords, and the
        password part of any configured URL (as written and percent-decoded)."""
        found: list[str] = []
        for value in (self.grist_api_key, self.memgraph_pwd, self.mcp_token):
            if value is not None and value.get_secret_value():
                found.append(value.get_secret_value())
        urls = [self.memgraph_uri, self.grist_server_url, self.llm_api_base, self.embeddings_api_base]
        if self.db_conn_uri is not None:
            urls.append(self.db_conn_uri.get_secret_value())
        for url in urls:
            if url:
                found.extend(uri_password_forms(url))
        return found


_URI_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def _uri_userinfo(uri: str) -> tuple[int, int] | None:
    """(start, end) of the password in `scheme://user:password@host...`, if there is one.

    The host starts after the *last* `@` before the path/query, so a password holding an
    unescaped `@`, `/` or `:` is still taken whole."""
    scheme = _URI_SCHEME.match(uri)
    if not scheme:
        return None
    start = scheme.end()
    end = len(uri)
    for mark in ("?", "#"):
        found = uri.find(mark, start)
        if found != -1:
            end = min(end, found)
    at = uri.rfind("@", start, end)
    colon = uri.find(":", start, at) if at != -1 else -1
    if colon == -1 or colon + 1 >= at:
        return None
    return colon + 1, at


def uri_password_forms(uri: str) -> list[str]:
    """The password in `uri` as written and percent-decoded ([] if there is none)."""
    from urllib.parse import unquote

    span = _uri_userinfo(uri)
    if span is None:
        return []
    raw = uri[span[0] : span[1]]
    return list(dict.fromkeys([raw, unquote(raw)]))


def redact_uri(uri: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://user:***@host/db`."""
    span = _uri_userinfo(uri)
    return f"{uri[: span[0]]}***{uri[span[1] :]}" if span else uri


_overrides: dict[str, Any] = {}


def export_dotenv(path: Path = Path(".env")) -> list[str]:
    """Copy the variables of a `.env` file into the process environment, never overriding one
    already set; return their names.

    Settings read `.env` themselves; this is for what other libraries read from the
    environment only, e.g. litellm's provider keys (OPENAI_API_KEY, ...), so a reference
    deployment's `.env` keeps working, and so those keys are known to redaction."""
    import os

    if not path.is_file():
        return []
    from dotenv import dotenv_values

    exported = []
    for name, value in dotenv_values(path, encoding="utf-8").items():
        if value is not None and name not in os.environ:
            os.environ[name] = value
            exported.append(name)
    return exported


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings built once, on first use; CLI flags land in `_overrides` before that.

    An invalid value (e.g. `CYPHER_ROWS_LIMIT=abc`) is a `ConfigError` naming the variable."""
    from pydantic import ValidationError

    try:
        return Settings(**_overrides)
    except ValidationError as exc:
        raise ConfigError(_describe_invalid(exc)) from None


def _describe_invalid(exc: Any) -> str:
    """One line per the first invalid setting: its variable name, what is wrong, the value
    (unless the setting is a secret)."""
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error.get("loc") else ""
    info = Settings.model_fields.get(field)
    aliases = getattr(getattr(info, "validation_alias", None), "choices", None)
    variable = str(aliases[0]) if aliases else field.upper()
    secret = info is not None and "SecretStr" in str(info.annotation)
    value = "" if secret else f" (got {str(error.get('input'))[:60]!r})"
    more = f"; and {exc.error_count() - 1} more" if exc.error_count() > 1 else ""
    return (
        f"invalid setting {variable}: {error['msg'].lower()}{value}{more}; fix it in the environment or .env"
    )


def override_settings(**values: Any) -> None:
    """Apply CLI flag values (None means "not given") and forget any cached settings."""
    _overrides.update({k: v for k, v in values.items() if v is not None})
    get_settings.cache_clear()


def reset_settings() -> None:
    _overrides.clear()
    get_settings.cache_clear()
