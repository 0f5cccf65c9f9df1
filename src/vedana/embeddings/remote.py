"""Embedding models behind litellm: OpenAI (`text-embedding-3-large`), Ollama (`ollama/…`), or any
OpenAI-compatible server (`openai/<name>` with EMBEDDINGS_API_BASE).

Requests are batched under a text-count and character budget, retried with exponential backoff
on rate limits, 5xx and connection errors, and every answer is checked for its dimension.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from vedana.embeddings.base import batches_by_budget, check_vectors
from vedana.errors import EmbeddingError
from vedana.redaction import redact

MAX_BACKOFF_S = 30.0
# Dimensions of well-known models, so no request is needed to learn them.
KNOWN_DIMS = {
    "text-embedding-3-large": 3072,
    "text-embedding-3-small": 1536,
    "text-embedding-ada-002": 1536,
}


def _bare_name(model: str) -> str:
    return model.split("/", 1)[1] if model.startswith(("openai/", "azure/")) else model


class RemoteEmbedder:
    batch_size = 256
    batch_chars = 100_000  # ≈ 25k tokens per request, far below providers' per-request caps
    max_text_chars = 8_000  # ≈ 2k tokens per text: inside every model's input limit

    def __init__(
        self,
        model: str,
        dim: int | None = None,
        api_base: str | None = None,
        *,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        timeout_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self._sleep = sleep
        self._requested_dim = dim
        self._dim = dim or KNOWN_DIMS.get(_bare_name(model))
        self.tokens_used = 0
        self.requests = 0

    @property
    def dim(self) -> int:
        if self._dim is None:  # unknown model and no EMBEDDINGS_DIM: ask it once
            self._dim = len(self._request(["dimension probe"])[0])
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        clipped = [t[: self.max_text_chars] for t in texts]
        for batch in batches_by_budget(clipped, self.batch_size, self.batch_chars):
            vectors.extend(self._request(batch))
        check_vectors(self.model, self.dim, len(texts), vectors)
        return vectors

    def _call_args(self) -> dict[str, Any]:
        # Retries are ours (below); the SDK's hidden ones would multiply them.
        args: dict[str, Any] = {"timeout": self.timeout_s, "max_retries": _NoRetries()}
        if self._requested_dim:
            args["dimensions"] = self._requested_dim
            if self.model.startswith("openai/"):
                # An OpenAI-compatible server: litellm would refuse `dimensions` for a model
                # name it does not know, but the user asked for it.
                args["allowed_openai_params"] = ["dimensions"]
            else:
                # Providers that cannot shorten vectors drop it; the size check then says so.
                args["drop_params"] = True
        if self.api_base:
            args["api_base"] = self.api_base
            if self.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                args["api_key"] = "unused"  # a local OpenAI-compatible server needs no key
        return args

    def _backoff(self, attempt: int) -> None:
        """Exponential, capped, with jitter so parallel clients do not retry in step."""
        delay = min(self.backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
        self._sleep(delay + random.uniform(0, delay / 2))

    def _request(self, batch: list[str]) -> list[list[float]]:
        litellm = _litellm()

        retryable = (
            litellm.RateLimitError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.APIConnectionError,
            litellm.Timeout,
        )
        args = self._call_args()
        for attempt in range(1, self.max_attempts + 1):
            try:
                self.requests += 1
                response = litellm.embedding(model=self.model, input=batch, **args)
                break
            except retryable as exc:
                if attempt == self.max_attempts:
                    raise EmbeddingError(
                        f"embedding model {self.model} still failing after {attempt} attempts "
                        f"({_first_line(exc)}); check the provider's status or rate limits"
                    ) from None
                self._backoff(attempt)
            except litellm.APIError as exc:
                if (getattr(exc, "status_code", 0) or 0) >= 500 and attempt < self.max_attempts:
                    self._backoff(attempt)
                    continue
                raise EmbeddingError(_failure(self.model, exc)) from None
            except Exception as exc:  # auth, bad request, unknown model: retrying will not help
                raise EmbeddingError(_failure(self.model, exc)) from None
        usage = getattr(response, "usage", None)
        self.tokens_used += int(getattr(usage, "prompt_tokens", 0) or 0)
        items = sorted(response.data, key=lambda item: _field(item, "index") or 0)
        return [list(_field(item, "embedding")) for item in items]


class _NoRetries(int):
    """Zero retries that litellm keeps: it replaces a falsy `max_retries` with its default (2)."""

    def __new__(cls) -> _NoRetries:
        return super().__new__(cls, 0)

    def __bool__(self) -> bool:
        return True


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-list download
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback" banners on our stdout
    return litellm


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return redact(text[0][:300] if text else type(exc).__name__)


def _failure(model: str, exc: Exception) -> str:
    return (
        f"embedding model {model} failed ({type(exc).__name__}: {_first_line(exc)}); "
        "check EMBEDDINGS_MODEL, EMBEDDINGS_API_BASE and the provider's API key"
    )
