"""Calls to the language models through litellm, so any provider it supports works.

litellm is imported on first use (it takes seconds) with its local price list, so importing
it never reaches the internet. Every call is timed and its tokens and cost (when litellm knows
the model's price) are recorded for the trace. Provider failures become `LLMError`s with one
sentence that says what to fix.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
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


# The key variables litellm reads for common providers (any one will do), so a missing key is
# reported without importing litellm (seconds); other providers are left to litellm's own check.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",),
    "deepinfra": ("DEEPINFRA_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY"),
    "perplexity": ("PERPLEXITYAI_API_KEY",),
}
# Providers served on this machine or the network without a key.
KEYLESS_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm"})
# Bare model names litellm routes to a provider by their prefix.
_BARE_PREFIXES = (
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude-", "anthropic"),
)


# What the screen says while a call of each purpose is on its way.
STEPS = {
    "filter": "choosing the part of the data model the question needs ({model})",
    "agent": "thinking ({model})",
    "finalize": "writing the answer from what was found ({model})",
}


def _tool_calls(response: Any) -> list[Any]:
    try:
        return list(response.choices[0].message.tool_calls or [])
    except (AttributeError, IndexError, TypeError):
        return []


def describe_tool_call(name: str, arguments: str | None) -> str:
    """One line for a tool call the model asked for: the query, or what is searched where."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    if name == "cypher" and args.get("query"):
        detail = " ".join(str(args["query"]).split())
    elif name == "vector_text_search":
        detail = f"{args.get('label')}.{args.get('property')} ≈ {args.get('text')!r}"
    else:
        detail = json.dumps(args, ensure_ascii=False)
    return redact(f"{name}: {detail}")


def model_provider(model: str) -> str | None:
    """The litellm provider of `model` when it can be told from the name alone, else None."""
    prefix, slash, _ = model.partition("/")
    if slash:
        return prefix if prefix in PROVIDER_KEYS or prefix in KEYLESS_PROVIDERS else None
    return next((provider for start, provider in _BARE_PREFIXES if model.startswith(start)), None)


def missing_key(model: str) -> list[str] | None:
    """The key variables `model` needs when none of them is set ([] when it needs none or one is
    set); None when the provider is not known here (litellm decides)."""
    provider = model_provider(model)
    if provider is None:
        return None
    names = PROVIDER_KEYS.get(provider, ())
    return [] if not names or any(name in os.environ for name in names) else list(names)


def check_models(settings: Settings, use_filter: bool | None = None) -> None:
    """Fail fast when the agent's model (or the filter's, when filtering) cannot be called."""
    llm = LLM(settings)
    llm.check(settings.model)
    if settings.enable_dm_filtering if use_filter is None else use_filter:
        llm.check(settings.effective_filter_model)


class LLM:
    """The configured provider; `complete()` is safe to call from several threads."""

    def __init__(self, settings: Settings, on_step: Callable[[str], None] | None = None) -> None:
        self.api_base = settings.llm_api_base or None
        self.calls: list[LLMCallTrace] = []
        self.on_step = on_step or (lambda text: None)  # what the model is doing now, for a spinner
        self._ran: list[str] = []  # the tool calls the last answer asked for
        self._lock = threading.Lock()
        self._checked: dict[str, str | None] = {}  # model -> api key to send (None: provider default)
        self._known: set[str] = set()  # models litellm has resolved to a provider
        self.import_s = 0.0  # time spent importing litellm in this run (0 once the process has it)

    def check(self, model: str) -> None:
        """Fail fast, before any work, when `model` cannot be called as configured: a missing key
        of a known provider is found from the environment alone, without importing litellm."""
        if model in self._checked:
            return
        if not model.strip():
            raise LLMError(f"no language model is configured; {_configure_hint()}")
        missing = missing_key(model)
        if missing is None:
            self._resolve(model)
            missing = [
                k
                for k in self._litellm().validate_environment(model).get("missing_keys", [])
                if k.endswith(("KEY", "TOKEN"))
            ]
        if missing and self.api_base is None:
            raise LLMError(
                f"no API key for model {model}: set {' or '.join(missing)}, or {_configure_hint()}"
            )
        self._checked[model] = PLACEHOLDER_KEY if missing else None

    def _litellm(self) -> Any:
        started = time.perf_counter()
        if "litellm" not in sys.modules:
            self.on_step("loading the model client (litellm)")
        litellm = import_litellm()
        self.import_s += time.perf_counter() - started
        return litellm

    def _resolve(self, model: str) -> None:
        """Raise unless litellm knows which provider serves `model`."""
        if model in self._known:
            return
        try:
            self._litellm().get_llm_provider(model, api_base=self.api_base)
        except Exception:
            raise LLMError(
                f"{model!r} is not a model name litellm knows; use provider/model, e.g. openai/gpt-4.1-mini, "
                "or openai/<model> with VEDANA_LLM_API_BASE for an OpenAI-compatible server"
            ) from None
        self._known.add(model)

    def complete(self, model: str, messages: list[dict[str, Any]], *, purpose: str, **params: Any) -> Any:
        """One chat completion; raises `LLMError` on any provider failure."""
        self.check(model)
        self._resolve(model)
        litellm = self._litellm()
        # drop_params: a provider without e.g. tool_choice="none" still answers.
        kwargs: dict[str, Any] = {"timeout": LLM_TIMEOUT_S, "drop_params": True, **params}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._checked[model]:
            kwargs["api_key"] = self._checked[model]
        step = STEPS.get(purpose, "asking {model}").format(model=model)
        # The tools ran in milliseconds; the model's next answer takes seconds: keep them in view.
        self.on_step(f"{step}, after {'; '.join(self._ran)}" if self._ran else step)
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
        self._ran = [describe_tool_call(c.function.name, c.function.arguments) for c in _tool_calls(response)]
        for text in self._ran:
            self.on_step(text)
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
