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
    env = {
        "OPENAI_API_KEY": "sk-abcdef",
        "MY_TOKEN": "tok-98765",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-1",
        "DB_PASS": "db-pass-2",
        "PATH": "/usr/bin",
        "SORT_KEY": "name",
        "SHORT_API_KEY": "ab",
    }
    found = secrets_from_environment(env)
    assert set(found) == {"sk-abcdef", "tok-98765", "aws-secret-1", "db-pass-2"}
    assert redact("key=sk-abcdef and tok-98765", found) == "key=*** and ***"
    assert redact("a short one: ab", ["ab", "sk-abc", "sk-abcdef"]) == "a short one: ab"
    assert redact("sk-abcdef", ["sk-abc", "sk-abcdef"]) == "***"  # the longer one first


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


def test_an_invalid_value_is_a_config_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from vedana.config import get_settings, reset_settings
    from vedana.errors import ConfigError

    monkeypatch.setenv("CYPHER_ROWS_LIMIT", "abc")
    monkeypatch.setenv("VEDANA_AGENT_MAX_ROUNDS", "many")
    reset_settings()
    try:
        with pytest.raises(ConfigError) as raised:
            get_settings()
    finally:
        reset_settings()
    message = str(raised.value)
    assert raised.value.exit_code == 2 and "\n" not in message
    assert "CYPHER_ROWS_LIMIT" in message and "'abc'" in message and "1 more" in message


@pytest.mark.parametrize(
    ("uri", "redacted", "forms"),
    [
        ("postgresql://app:s3cr3t@db:5432/kb", "postgresql://app:***@db:5432/kb", ["s3cr3t"]),
        # An unescaped "@" or "/" in the password: the host starts after the last "@".
        ("postgresql://app:p@ss/w0rd@db/kb", "postgresql://app:***@db/kb", ["p@ss/w0rd"]),
        ("postgresql://app:a%40b%2Fc@db/kb?sslmode=require", "postgresql://app:***@db/kb?sslmode=require",
         ["a%40b%2Fc", "a@b/c"]),
        ("bolt://neo:graph-pw@memgraph:7687", "bolt://neo:***@memgraph:7687", ["graph-pw"]),
        ("postgresql://app@db/kb", "postgresql://app@db/kb", []),
        ("postgresql://db/kb?options=a@b", "postgresql://db/kb?options=a@b", []),
        ("not a url", "not a url", []),
    ],
)  # fmt: skip
def test_passwords_in_urls_are_found_whole(uri: str, redacted: str, forms: list[str]) -> None:
    from vedana.config import uri_password_forms

    assert redact_uri(uri) == redacted
    assert uri_password_forms(uri) == forms


def test_passwords_in_any_configured_url_are_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMGRAPH_URI", "bolt://neo:graph-pw-1@memgraph:7687")
    monkeypatch.setenv("DB_CONN_URI", "postgresql://app:db%40pw@db/kb")
    monkeypatch.setenv("VEDANA_LLM_API_BASE", "https://user:llm-pw-2@llm.example/v1")
    assert set(Settings(_env_file=None).secrets()) >= {"graph-pw-1", "db%40pw", "db@pw", "llm-pw-2"}


def test_dotenv_variables_reach_the_environment_without_overriding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Provider keys are read by litellm from the environment, not from Settings: a reference
    deployment's `.env` with OPENAI_API_KEY must still work, and the key be redacted."""
    import os

    from vedana.config import export_dotenv

    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv-1234\nMODEL=from-dotenv\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MODEL", "from-environment")
    assert export_dotenv() == ["OPENAI_API_KEY"]
    try:
        assert os.environ["OPENAI_API_KEY"] == "sk-from-dotenv-1234"
        assert os.environ["MODEL"] == "from-environment"
        assert redact("key sk-from-dotenv-1234") == "key ***"
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert export_dotenv() == []  # no .env here: nothing happens
