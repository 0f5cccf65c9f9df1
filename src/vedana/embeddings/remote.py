"""Embedding models behind litellm: OpenAI (`text-embedding-3-large`), Ollama (`ollama/…`), or any
OpenAI-compatible server (`openai/<name>` with EMBEDDINGS_API_BASE).

Requests are batched under a text-count and character budget, retried by the policy of
`vedana.retry` on rate limits, 5xx and connection errors (EMBEDDINGS_TIMEOUT_S per request,
EMBEDDINGS_DEADLINE_S per batch), and every answer is checked for its dimension.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from vedana.embeddings.base import batches_by_budget, check_vectors
from vedana.errors import EmbeddingError
from vedana.redaction import redact
from vedana.retry import RetryPolicy, refused
from vedana.retry import call as call_with_retry

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
        deadline_s: float = 180.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
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

    def _policy(self) -> RetryPolicy:
        # Read at each request: tests and callers may change the attributes after construction.
        return RetryPolicy(
            attempts=self.max_attempts,
            backoff_s=self.backoff_s,
            max_backoff_s=MAX_BACKOFF_S,
            timeout_s=self.timeout_s,
            deadline_s=self.deadline_s,
        )

    def _request(self, batch: list[str]) -> list[list[float]]:
        litellm = _litellm()

        transient = (
            litellm.RateLimitError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.APIConnectionError,
            litellm.Timeout,
        )

        def retryable(exc: BaseException) -> bool:
            if isinstance(exc, transient):
                return True
            return isinstance(exc, litellm.APIError) and (getattr(exc, "status_code", 0) or 0) >= 500

        args = self._call_args()
        attempts = 0

        def attempt(timeout_s: float) -> Any:
            nonlocal attempts
            attempts += 1
            self.requests += 1
            return litellm.embedding(model=self.model, input=batch, **{**args, "timeout": timeout_s})

        try:
            response = call_with_retry(
                attempt,
                self._policy(),
                retry_on=retryable,
                what=f"embedding model {self.model}",
                sleep=self._sleep,
            )
        except Exception as exc:
            raise EmbeddingError(self._gave_up(exc, attempts, retryable(exc), litellm)) from None
        usage = getattr(response, "usage", None)
        self.tokens_used += int(getattr(usage, "prompt_tokens", 0) or 0)
        items = sorted(response.data, key=lambda item: _field(item, "index") or 0)
        return [list(_field(item, "embedding")) for item in items]

    def _gave_up(self, exc: Exception, attempts: int, transient: bool, litellm: Any) -> str:
        if not transient:  # auth, bad request, unknown model: retrying would not help
            return _failure(self.model, exc)
        where = f"embedding model {self.model}" + (f" at {redact(self.api_base)}" if self.api_base else "")
        if isinstance(exc, litellm.Timeout):
            return (
                f"{where} did not answer within {self.deadline_s:g} s ({attempts} attempts, "
                f"{self.timeout_s:g} s each at most); check EMBEDDINGS_API_BASE and the server, "
                "or raise EMBEDDINGS_TIMEOUT_S / EMBEDDINGS_DEADLINE_S"
            )
        if refused(exc):
            return f"{where} refused the connection ({attempts} attempts); check EMBEDDINGS_API_BASE"
        return (
            f"{where} still failing after {attempts} attempts "
            f"({_first_line(exc)}); check the provider's status or rate limits"
        )


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
