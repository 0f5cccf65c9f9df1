"""Embedders: selection by EMBEDDINGS_MODEL, dimension checks, budget batching, and a litellm model
through a local OpenAI-compatible server (retries on 429/5xx, no retry on 401)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.fake_embeddings import FakeEmbeddings
from support.silent_server import silent_server
from vedana.config import Settings
from vedana.embeddings import batches_by_budget, default_threshold, get_embedder
from vedana.embeddings.hashing import HashEmbedder
from vedana.embeddings.local import LocalEmbedder
from vedana.embeddings.remote import RemoteEmbedder
from vedana.errors import ConfigError, EmbeddingError


def make_settings(home: Path, **values) -> Settings:
    return Settings(_env_file=None, vedana_home=home, **values)


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings() as fake:
        yield fake


def remote(settings_home: Path, server: FakeEmbeddings, **values) -> RemoteEmbedder:
    embedder = get_embedder(
        make_settings(
            settings_home, embeddings_model="openai/tiny-embed", embeddings_api_base=server.api_base, **values
        )
    )
    assert isinstance(embedder, RemoteEmbedder)
    embedder.backoff_s = 0.01  # this object's own setting: keeps the retry tests quick
    return embedder


def test_model_names_pick_the_backend(tmp_path: Path) -> None:
    default = get_embedder(make_settings(tmp_path))
    assert isinstance(default, LocalEmbedder) and (default.model, default.dim) == ("all-MiniLM-L6-v2", 384)
    alias = get_embedder(make_settings(tmp_path, embeddings_model="sentence-transformers/all-MiniLM-L6-v2"))
    assert alias.model == "all-MiniLM-L6-v2"  # one name for one model: no needless re-embedding
    fake = get_embedder(make_settings(tmp_path, embeddings_model="hash-32"))
    assert isinstance(fake, HashEmbedder) and fake.dim == 32
    openai = get_embedder(
        make_settings(tmp_path, embeddings_model="text-embedding-3-large", embeddings_dim=1024)
    )
    assert isinstance(openai, RemoteEmbedder) and openai.dim == 1024
    assert get_embedder(make_settings(tmp_path, embeddings_model="text-embedding-3-small")).dim == 1536
    with pytest.raises(ConfigError, match="hash-<dim>"):
        get_embedder(make_settings(tmp_path, embeddings_model="hash-x"))


def test_dimension_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        EmbeddingError, match=r"384-dimensional vectors but EMBEDDINGS_DIM is 768; set EMBEDDINGS_DIM=384"
    ):
        get_embedder(make_settings(tmp_path, embeddings_dim=768))
    with pytest.raises(EmbeddingError, match="EMBEDDINGS_DIM is 16"):
        get_embedder(make_settings(tmp_path, embeddings_model="hash-32", embeddings_dim=16))


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    embedder = HashEmbedder(64)
    a, b, c = embedder.embed(["Red apples", "red APPLES", "blue whale"])
    assert a == b and a != c
    assert abs(sum(x * x for x in a) - 1.0) < 1e-9
    assert sum(x * y for x, y in zip(a, embedder.embed(["red pears"])[0], strict=True)) > 0.3


def test_batches_respect_count_and_character_budgets() -> None:
    texts = ["aaaa", "bb", "cccccc", "d", "eeeeeeeeeeeee", "f"]
    batches = list(batches_by_budget(texts, max_texts=3, max_chars=8))
    assert [t for batch in batches for t in batch] == texts
    assert batches == [["aaaa", "bb"], ["cccccc", "d"], ["eeeeeeeeeeeee"], ["f"]]
    assert all(len(b) <= 3 for b in batches)


def test_default_thresholds_suit_the_model() -> None:
    assert default_threshold("all-MiniLM-L6-v2") == 0.3
    assert default_threshold("hash-64") == 0.1
    assert 0 < default_threshold("ollama/nomic-embed-text") < 0.5


def test_litellm_model_through_an_openai_compatible_server(tmp_path: Path, server: FakeEmbeddings) -> None:
    embedder = remote(tmp_path, server, embeddings_dim=16)
    vectors = embedder.embed(["mountain bike", "kettle"])
    assert [len(v) for v in vectors] == [16, 16]
    assert vectors == HashEmbedder(16).embed(["mountain bike", "kettle"])  # in input order
    [request] = server.requests
    assert request["input"] == ["mountain bike", "kettle"] and request["dimensions"] == 16
    assert embedder.tokens_used == 3


def test_unknown_dimension_is_probed_once(tmp_path: Path, server: FakeEmbeddings) -> None:
    embedder = remote(tmp_path, server)
    assert embedder.dim == server.default_dim and embedder.dim == server.default_dim
    assert len(server.requests) == 1 and "dimensions" not in server.requests[0]


@pytest.mark.parametrize("status", [429, 500])
def test_rate_limits_and_server_errors_are_retried(
    tmp_path: Path, server: FakeEmbeddings, status: int
) -> None:
    embedder = remote(tmp_path, server, embeddings_dim=8)
    server.failures.append(status)
    vectors = embedder.embed(["retry me"])
    assert len(server.requests) == 2 and len(vectors[0]) == 8


def test_persistent_failure_gives_up_with_a_clear_error(tmp_path: Path, server: FakeEmbeddings) -> None:
    embedder = remote(tmp_path, server, embeddings_dim=8)
    embedder.max_attempts = 3
    server.failures.extend([503] * 5)
    with pytest.raises(EmbeddingError, match="after 3 attempts"):
        embedder.embed(["never"])
    assert len(server.requests) == 3


def test_auth_errors_are_not_retried_and_keys_stay_hidden(
    tmp_path: Path, server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123456")
    embedder = remote(tmp_path, server, embeddings_dim=8)
    server.failures.append(401)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed(["x"])
    assert len(server.requests) == 1
    assert "sk-test-secret-123456" not in str(caught.value) and "\n" not in str(caught.value)


def test_requests_are_batched_by_budget(tmp_path: Path, server: FakeEmbeddings) -> None:
    embedder = remote(tmp_path, server, embeddings_dim=8)
    embedder.batch_size = 3
    texts = [f"text number {i}" for i in range(7)]
    assert len(embedder.embed(texts)) == 7
    assert [len(r["input"]) for r in server.requests] == [3, 3, 1]


def test_wrong_dimension_from_the_provider_is_a_clear_error(tmp_path: Path, server: FakeEmbeddings) -> None:
    embedder = remote(tmp_path, server, embeddings_dim=16)
    server.ignore_dimensions = True  # a provider that cannot shorten its vectors
    with pytest.raises(EmbeddingError, match="returned 24-dimensional vectors but 16 were expected"):
        embedder.embed(["x"])


def test_hung_embeddings_server_fails_within_the_deadline() -> None:
    """A server that accepts and never answers: one line naming it and the settings, within
    EMBEDDINGS_DEADLINE_S plus a few seconds (not attempts × timeout)."""
    with silent_server() as url:
        embedder = RemoteEmbedder("openai/hung-model", 8, f"{url}/v1", timeout_s=1.0, deadline_s=3.0)
        started = time.monotonic()
        with pytest.raises(EmbeddingError) as caught:
            embedder.embed(["anyone there?"])
        seconds = time.monotonic() - started

    message = str(caught.value)
    assert "\n" not in message
    assert f"embedding model openai/hung-model at {url}/v1 did not answer within 3 s" in message
    assert "EMBEDDINGS_DEADLINE_S" in message
    assert seconds < 3.0 + 5.0, seconds
