"""Which model `make demo` asks its question with, if any (run by scripts/demo.sh).

The configured one (MODEL, from the environment or `.env`) when `vedana ask` could call it: a
provider key litellm reads is set, or VEDANA_LLM_API_BASE, or an `ollama/…` / `ollama_chat/…`
model with Ollama answering. With nothing configured, a chat model pulled into an Ollama running
on this machine. Prints the model and exits 0; otherwise prints why not and exits 1.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

from vedana.agent.llm import check_models, model_provider
from vedana.config import export_dotenv, get_settings
from vedana.errors import VedanaError

OLLAMA = ("ollama", "ollama_chat")
PROBE_TIMEOUT_S = 1.5


def ollama_base() -> str:
    """Where litellm looks for Ollama (OLLAMA_API_BASE, else its default)."""
    return os.environ.get("OLLAMA_API_BASE", "http://localhost:11434").rstrip("/")


def ollama_models() -> list[str] | None:
    """The chat models Ollama has pulled (embedding models left out); None when it does not answer."""
    try:
        with urllib.request.urlopen(f"{ollama_base()}/api/tags", timeout=PROBE_TIMEOUT_S) as reply:
            listed = json.load(reply).get("models") or []
    except (OSError, ValueError):
        return None
    names = [m.get("name") or m.get("model") or "" for m in listed if isinstance(m, dict)]
    return [name for name in names if name and "embed" not in name]


def pick() -> str:
    """The model to ask with; raises `VedanaError` saying why there is none."""
    export_dotenv()
    settings = get_settings()
    configured = bool(os.environ.get("MODEL") or settings.llm_api_base)
    try:
        check_models(settings)
    except VedanaError:
        if configured:
            raise
        local = ollama_models()
        if local:
            return f"ollama_chat/{local[0]}"
        raise VedanaError(
            "set OPENAI_API_KEY, or MODEL with its provider's key (e.g. MODEL=gemini/gemini-2.5-flash and "
            "GEMINI_API_KEY), or run Ollama here with a model pulled (ollama pull llama3.2), to try it"
        ) from None
    if model_provider(settings.model) in OLLAMA and ollama_models() is None:
        raise VedanaError(
            f"Ollama does not answer at {ollama_base()}; start it (ollama serve) or set OLLAMA_API_BASE"
        )
    return settings.model


def main() -> int:
    try:
        print(pick())
    except VedanaError as exc:
        print(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
