"""`ask` and `chat` with no usable language model fail at once, before importing litellm (seconds)
or starting any service; the key table that decides it agrees with litellm's own check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vedana.agent.llm import KEYLESS_PROVIDERS, PROVIDER_KEYS, missing_key, model_provider

# Runs the real entry point, then reports whether litellm was imported on the way.
_RUNNER = """
import sys
import vedana.cli.app as cli
sys.argv = ["vedana", *sys.argv[1:]]
try:
    cli.main()
finally:
    sys.__stdout__.write(f"litellm imported: {'litellm' in sys.modules}\\n")
"""

# Every variable that could make a model usable, so each test sets exactly what it means to.
_MODEL_VARIABLES = ("MODEL", "FILTER_MODEL", "VEDANA_LLM_API_BASE", "ENABLE_DM_FILTERING")


def _run(tmp_path: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_AUTH_TOKEN")) and k not in _MODEL_VARIABLES
    }
    environ.update(VEDANA_HOME=str(tmp_path / "home"), **env)
    return subprocess.run(
        [sys.executable, "-c", _RUNNER, *args],
        input=stdin, capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(("ask", "Who likes koalas?"), ""), (("chat",), "Who likes koalas?\nAnd where?\n")],
    ids=["ask", "chat"],
)
def test_no_key_fails_in_one_line_before_litellm_or_any_service(
    tmp_path: Path, args: tuple[str, ...], stdin: str
) -> None:
    out = _run(tmp_path, *args, stdin=stdin)
    assert out.returncode == 1
    assert out.stderr.startswith("error: no API key for model gpt-4.1-mini: set OPENAI_API_KEY, or set MODEL")
    assert len(out.stderr.strip().splitlines()) == 1
    assert out.stdout == "litellm imported: False\n"  # no greeting from chat, no answer
    assert not (tmp_path / "home").exists()


def test_the_filter_models_key_is_checked_too(tmp_path: Path) -> None:
    out = _run(tmp_path, "ask", "q", OPENAI_API_KEY="sk-x", FILTER_MODEL="anthropic/claude-3-5-haiku-latest")
    assert out.returncode == 1
    assert out.stderr.startswith(
        "error: no API key for model anthropic/claude-3-5-haiku-latest: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"
    )
    assert "litellm imported: False" in out.stdout


def test_a_provider_named_in_model_asks_for_its_own_key(tmp_path: Path) -> None:
    out = _run(tmp_path, "ask", "q", MODEL="gemini/gemini-2.5-flash")
    assert out.returncode == 1
    assert out.stderr.startswith(
        "error: no API key for model gemini/gemini-2.5-flash: set GEMINI_API_KEY or GOOGLE_API_KEY"
    )


def test_a_model_litellm_does_not_know_is_named(tmp_path: Path) -> None:
    """Names the table cannot place are left to litellm, which says what is wrong."""
    out = _run(tmp_path, "ask", "q", MODEL="nosuchprovider/some-model")
    assert out.returncode == 1
    assert out.stderr.startswith("error: 'nosuchprovider/some-model' is not a model name litellm knows")


def test_a_local_model_or_an_api_base_needs_no_key(tmp_path: Path) -> None:
    """No key is asked for: the run goes on to the knowledge base, which this home does not have."""
    for env in (
        {"MODEL": "ollama_chat/llama3.2"},
        {"MODEL": "openai/local", "VEDANA_LLM_API_BASE": "http://127.0.0.1:9/v1"},
    ):
        out = _run(tmp_path, "ask", "q", ENABLE_DM_FILTERING="false", **env)
        assert out.returncode == 1
        assert "API key" not in out.stderr
        assert "no data model found" in out.stderr


# -- the table against litellm ---------------------------------------------------------------------

# A model name per provider of the table, as users write them.
SAMPLES = {
    "openai": ["openai/gpt-4.1-mini", "gpt-4.1-mini", "gpt-4o", "o3-mini", "o4-mini", "o1"],
    "anthropic": ["anthropic/claude-3-5-haiku-latest", "claude-sonnet-4-5"],
    "openrouter": ["openrouter/openai/gpt-4.1-mini"],
    "gemini": ["gemini/gemini-2.5-flash"],
    "mistral": ["mistral/mistral-small-latest"],
    "groq": ["groq/llama-3.1-8b-instant"],
    "deepseek": ["deepseek/deepseek-chat"],
    "xai": ["xai/grok-3-mini"],
    "together_ai": ["together_ai/meta-llama/Llama-3-8b-chat-hf"],
    "deepinfra": ["deepinfra/meta-llama/Meta-Llama-3.1-8B-Instruct"],
    "fireworks_ai": ["fireworks_ai/accounts/fireworks/models/llama-v3p1-8b-instruct"],
    "perplexity": ["perplexity/sonar"],
}


def test_every_provider_of_the_table_has_samples() -> None:
    assert set(SAMPLES) == set(PROVIDER_KEYS)


@pytest.mark.filterwarnings("ignore::UserWarning:pydantic")  # litellm's own types, as it imports a provider
@pytest.mark.parametrize("model", [m for models in SAMPLES.values() for m in models])
def test_the_key_table_agrees_with_litellm(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from vedana.agent.llm import import_litellm

    litellm = import_litellm()
    provider = model_provider(model)
    assert provider is not None and litellm.get_llm_provider(model)[1] == provider
    names = PROVIDER_KEYS[provider]
    for name in {n for ns in PROVIDER_KEYS.values() for n in ns}:
        monkeypatch.delenv(name, raising=False)

    def litellm_missing() -> list[str]:
        return [
            k for k in litellm.validate_environment(model)["missing_keys"] if k.endswith(("KEY", "TOKEN"))
        ]

    assert missing_key(model) == list(names) and litellm_missing()  # both: a key is missing
    for name in names:  # any one of the table's names satisfies litellm too
        monkeypatch.setenv(name, "sk-test")
        assert missing_key(model) == [] and litellm_missing() == []
        monkeypatch.delenv(name)


def test_keyless_providers_need_no_key_for_litellm_either(monkeypatch: pytest.MonkeyPatch) -> None:
    from vedana.agent.llm import import_litellm

    litellm = import_litellm()
    for provider in sorted(KEYLESS_PROVIDERS):
        model = f"{provider}/some-model"
        assert missing_key(model) == []
        assert not [
            k for k in litellm.validate_environment(model)["missing_keys"] if k.endswith(("KEY", "TOKEN"))
        ]


def test_names_the_table_cannot_place_are_left_to_litellm() -> None:
    assert missing_key("nosuchprovider/x") is None
    assert missing_key("my-finetune") is None
