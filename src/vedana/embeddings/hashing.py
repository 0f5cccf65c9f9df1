"""A fast, deterministic stand-in embedder for benchmarks (`EMBEDDINGS_MODEL=hash-<dim>`).

Each lower-cased word is hashed to a few signed coordinates (feature hashing) and the vector is
L2-normalised, so texts sharing words are similar and nothing needs a model or a network. It
lets the benchmark show graph and database costs on their own; it is no semantic model.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from vedana.errors import ConfigError

HASH_PREFIX = "hash-"
_WORD = re.compile(r"\w+", re.UNICODE)
_SLOTS = 4


def is_hash_model(name: str) -> bool:
    return name.strip().lower().startswith(HASH_PREFIX)


def hash_model_dim(name: str) -> int:
    suffix = name.strip()[len(HASH_PREFIX) :]
    if not suffix.isdigit() or not 2 <= int(suffix) <= 16000:
        raise ConfigError(f"EMBEDDINGS_MODEL={name!r} is not valid; use hash-<dim>, e.g. hash-384")
    return int(suffix)


class HashEmbedder:
    batch_size = 1024
    batch_chars = 1024 * 512

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.model = f"{HASH_PREFIX}{dim}"

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in _WORD.findall(text.lower()) or [text]:
            # Several signed coordinates per word, so distinct texts rarely get identical vectors
            # (identical vectors by the thousand would make the HNSW benchmark unrealistic).
            digest = hashlib.blake2b(word.encode(), digest_size=4 * _SLOTS).digest()
            for slot in range(_SLOTS):
                value = int.from_bytes(digest[4 * slot : 4 * slot + 4], "little")
                vector[value % self.dim] += 1.0 if value >> 31 else -1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]
