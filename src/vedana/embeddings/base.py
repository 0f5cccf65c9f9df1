"""What every embedder offers, and the helpers they share: batching by budget, dimension checks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

from vedana.errors import EmbeddingError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one fixed dimension.

    `model` is the name recorded with the vectors: two embedders with the same `model` and
    `dim` must give interchangeable vectors, so the index may reuse cached ones.
    """

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def batches_by_budget(texts: Sequence[str], max_texts: int, max_chars: int) -> Iterator[list[str]]:
    """Consecutive batches of at most `max_texts` texts and (unless one text alone is longer)
    `max_chars` characters, so one request never exceeds a provider's limits."""
    batch: list[str] = []
    chars = 0
    for text in texts:
        if batch and (len(batch) >= max_texts or chars + len(text) > max_chars):
            yield batch
            batch, chars = [], 0
        batch.append(text)
        chars += len(text)
    if batch:
        yield batch


def check_vectors(model: str, expected_dim: int, count: int, vectors: Sequence[Sequence[float]]) -> None:
    """Raise EmbeddingError unless there is one vector per text, each of `expected_dim` floats."""
    if len(vectors) != count:
        raise EmbeddingError(
            f"embedding model {model} returned {len(vectors)} vectors for {count} texts; "
            "check the provider or EMBEDDINGS_MODEL"
        )
    for vector in vectors:
        if len(vector) != expected_dim:
            raise EmbeddingError(
                f"embedding model {model} returned {len(vector)}-dimensional vectors but "
                f"{expected_dim} were expected; set EMBEDDINGS_DIM={len(vector)} or unset it"
            )
