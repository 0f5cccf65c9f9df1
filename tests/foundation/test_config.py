from __future__ import annotations

from pathlib import Path

import pytest

from vedana.config import Settings, redact_uri
from vedana.redaction import RedactingFilter, redact, secrets_from_environment


def test_reference_variable_names_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIST_SERVER_URL", "https://grist.example")
    monkeypatch.setenv("GRIST_API_KEY", "k-123456")
    monkeypatch.setenv("MEMGRAPH_URI", "bolt://graph:7687")
    monkeypatch.setenv("ENABLE_DM_FILTERING", "false")
    monkeypatch.setenv("CYPHER_ROWS_LIMIT", "7")
    s = Settings(_env_file=None)
    assert s.grist_server_url == "https://grist.example"
    assert s.grist_api_key is not None and s.grist_api_key.get_secret_value() == "k-123456"
    assert not s.uses_embedded_graph
    assert s.uses_embedded_postgres
    assert s.enable_dm_filtering is False
    assert s.cypher_rows_limit == 7
    assert "k-123456" not in repr(s)


def test_dotenv_file_in_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("MODEL=openai/gpt-x\nVEDANA_HOME=/tmp/somewhere\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MODEL", raising=False)
    monkeypatch.delenv("VEDANA_HOME", raising=False)
    s = Settings()
    assert s.model == "openai/gpt-x"
    assert s.vedana_home == Path("/tmp/somewhere")


def test_password_in_db_uri_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_CONN_URI", "postgresql://app:s3cr3t-pw@db:5432/kb")
    s = Settings(_env_file=None)
    assert "s3cr3t-pw" in s.secrets()
    assert redact_uri("postgresql://app:s3cr3t-pw@db:5432/kb") == "postgresql://app:***@db:5432/kb"


def test_secret_named_environment_variables_are_redacted() -> None:
    env = {"OPENAI_API_KEY": "sk-abcdef", "MY_TOKEN": "tok-98765", "PATH": "/usr/bin", "SHORT_KEY": "ab"}
    found = secrets_from_environment(env)
    assert set(found) == {"sk-abcdef", "tok-98765"}
    assert redact("key=sk-abcdef and tok-98765", found) == "key=*** and ***"


def test_logging_filter_masks_secrets(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    monkeypatch.setenv("GRIST_API_KEY", "grist-secret-777")
    logger = logging.getLogger("vedana.test")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.WARNING):
        logger.warning("calling with %s", "grist-secret-777")
    assert "grist-secret-777" not in caplog.text
    assert "***" in caplog.text
