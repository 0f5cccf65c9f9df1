"""Calls to the language models through litellm, so any provider it supports works.

litellm is imported on first use (it takes seconds) with its local price list, so importing
it never reaches the internet. Every call is timed and its tokens and cost (when litellm knows
the model's price) are recorded for the trace. Provider failures become `LLMError`s with one
sentence that says what to fix.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from vedana.agent.trace import LLMCallTrace
from vedana.errors import LLMError
from vedana.redaction import redact

if TYPE_CHECKING:
    from vedana.config import Settings

LLM_TIMEOUT_S = 120.0
# A keyless OpenAI-compatible server (Ollama's /v1, vLLM, llama.cpp) still needs some key
# for the OpenAI client; this placeholder is sent only when none is configured.
PLACEHOLDER_KEY = "not-needed"

_import_lock = threading.Lock()


def import_litellm() -> Any:
    with _import_lock:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm  # seconds on the first call of a process, free afterwards

        litellm.suppress_debug_info = True  # it would print provider banners on stdout
        return litellm


def _configure_hint() -> str:
    return (
        "set MODEL (e.g. gpt-4.1-mini with OPENAI_API_KEY, openrouter/<model> with OPENROUTER_API_KEY, "
        "ollama_chat/<model>) or point VEDANA_LLM_API_BASE at an OpenAI-compatible server with MODEL=openai/<model>"
    )


class LLM:
    """The configured provider; `complete()` is safe to call from several threads."""

    def __init__(self, settings: Settings) -> None:
        self.api_base = settings.llm_api_base or None
        self.calls: list[LLMCallTrace] = []
        self._lock = threading.Lock()
        self._checked: dict[str, str | None] = {}  # model -> api key to send (None: provider default)
        self.import_s = 0.0  # time spent importing litellm in this run (0 once the process has it)

    def check(self, model: str) -> None:
        """Fail fast, before any work, when `model` cannot be called as configured."""
        if model in self._checked:
            return
        if not model.strip():
            raise LLMError(f"no language model is configured; {_configure_hint()}")
        started = time.perf_counter()
        litellm = import_litellm()
        self.import_s += time.perf_counter() - started
        try:
            litellm.get_llm_provider(model, api_base=self.api_base)
        except Exception:
            raise LLMError(
                f"{model!r} is not a model name litellm knows; use provider/model, e.g. openai/gpt-4.1-mini, "
                "or openai/<model> with VEDANA_LLM_API_BASE for an OpenAI-compatible server"
            ) from None
        missing = [
            k
            for k in litellm.validate_environment(model).get("missing_keys", [])
            if k.endswith(("KEY", "TOKEN"))
        ]
        key: str | None = None
        if missing and self.api_base is None:
            raise LLMError(
                f"no API key for model {model}: set {' or '.join(missing)}, or {_configure_hint()}"
            )
        if missing:
            key = PLACEHOLDER_KEY
        self._checked[model] = key

    def complete(self, model: str, messages: list[dict[str, Any]], *, purpose: str, **params: Any) -> Any:
        """One chat completion; raises `LLMError` on any provider failure."""
        self.check(model)
        litellm = import_litellm()
        # drop_params: a provider without e.g. tool_choice="none" still answers.
        kwargs: dict[str, Any] = {"timeout": LLM_TIMEOUT_S, "drop_params": True, **params}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._checked[model]:
            kwargs["api_key"] = self._checked[model]
        started = time.perf_counter()
        record = LLMCallTrace(purpose=purpose, model=model, elapsed_s=0.0)
        try:
            response = litellm.completion(model=model, messages=messages, **kwargs)
        except Exception as exc:
            record.elapsed_s = round(time.perf_counter() - started, 4)
            error = _as_llm_error(model, self.api_base, exc)
            record.error = str(error)
            self._record(record)
            raise error from exc
        record.elapsed_s = round(time.perf_counter() - started, 4)
        usage = getattr(response, "usage", None)
        record.prompt_tokens = getattr(usage, "prompt_tokens", None)
        record.completion_tokens = getattr(usage, "completion_tokens", None)
        try:
            record.cost_usd = round(float(litellm.completion_cost(completion_response=response)), 8)
        except Exception:  # unknown price (local or custom model): cost stays unknown
            record.cost_usd = None
        self._record(record)
        return response

    def _record(self, record: LLMCallTrace) -> None:
        with self._lock:
            self.calls.append(record)


def _as_llm_error(model: str, api_base: str | None, exc: Exception) -> LLMError:
    name = type(exc).__name__
    detail = redact(" ".join(str(exc).split()))[:300]
    where = f" at {api_base}" if api_base else ""
    if name in {"AuthenticationError", "PermissionDeniedError"}:
        return LLMError(f"the provider{where} rejected the API key for {model}; check the key ({detail})")
    if name in {"APIConnectionError", "Timeout", "ServiceUnavailableError", "InternalServerError"}:
        return LLMError(
            f"could not get an answer from {model}{where} ({name}: {detail}); check the server, VEDANA_LLM_API_BASE and the network"
        )
    if name == "NotFoundError":
        return LLMError(f"the provider{where} does not know model {model}; check MODEL / --model ({detail})")
    if name == "RateLimitError":
        return LLMError(f"the provider rate-limited {model}; wait and retry or use another model ({detail})")
    return LLMError(f"the call to {model} failed ({name}: {detail})")
