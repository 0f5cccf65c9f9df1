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

DEFAULT_EMBEDDINGS_MODEL = "all-MiniLM-L6-v2"
DEFAULT_EMBEDDINGS_DIM = 384


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

    # Storage; unset means the embedded services under vedana_home.
    db_conn_uri: SecretStr | None = None
    memgraph_uri: str | None = None
    memgraph_user: str | None = None
    memgraph_pwd: SecretStr | None = None
    vedana_home: Path = Path(".vedana")

    # Models
    model: str = "gpt-4.1-mini"
    filter_model: str | None = None
    enable_dm_filtering: bool = True
    embeddings_model: str = DEFAULT_EMBEDDINGS_MODEL
    embeddings_dim: int | None = None
    embeddings_threshold: float | None = None
    embeddings_top_n: int = 10
    # Base URL for an OpenAI-compatible provider (also read as OPENAI_API_BASE by litellm itself).
    llm_api_base: str | None = Field(
        default=None, validation_alias=AliasChoices("VEDANA_LLM_API_BASE", "LLM_API_BASE")
    )
    embeddings_api_base: str | None = Field(
        default=None, validation_alias=AliasChoices("VEDANA_EMBEDDINGS_API_BASE", "EMBEDDINGS_API_BASE")
    )

    # Agent
    cypher_rows_limit: int = 200
    cypher_timeout_s: float = 10.0
    pipeline_history_length: int = 20
    agent_max_rounds: int = Field(default=5, validation_alias=AliasChoices("VEDANA_AGENT_MAX_ROUNDS"))

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
        """Every secret value currently configured, for redaction."""
        found: list[str] = []
        for value in (self.grist_api_key, self.memgraph_pwd):
            if value is not None and value.get_secret_value():
                found.append(value.get_secret_value())
        uris = [self.db_conn_uri.get_secret_value() if self.db_conn_uri else None]
        uris += [self.memgraph_uri, self.llm_api_base]  # e.g. a gateway at https://user:pw@host/v1
        for uri in uris:
            password = _password_in_uri(uri) if uri else None
            if password:
                found.append(password)
        return found


_URI_PASSWORD = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@]*:([^@/]+)@")


def _password_in_uri(uri: str) -> str | None:
    match = _URI_PASSWORD.match(uri)
    return match.group(1) if match else None


def redact_uri(uri: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://user:***@host/db`."""
    password = _password_in_uri(uri)
    return uri.replace(f":{password}@", ":***@", 1) if password else uri


_overrides: dict[str, Any] = {}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings built once, on first use; CLI flags land in `_overrides` before that."""
    return Settings(**_overrides)


def override_settings(**values: Any) -> None:
    """Apply CLI flag values (None means "not given") and forget any cached settings."""
    _overrides.update({k: v for k, v in values.items() if v is not None})
    get_settings.cache_clear()


def reset_settings() -> None:
    _overrides.clear()
    get_settings.cache_clear()
