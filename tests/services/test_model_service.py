"""The warm local-model service: same vectors as in-process, no torch in the client, restarted
after a crash, shown and stopped like the other services, idle-stopped, and a fallback to
in-process loading (said once) when it cannot run."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vedana.config import Settings
from vedana.embeddings import get_embedder
from vedana.embeddings import local as local_module
from vedana.embeddings.local import LocalEmbedder
from vedana.embeddings.service import model_status, request, stop_model_service
from vedana.ops.services import services_status, stop_services

pytestmark = pytest.mark.slow

TEXTS = ["Mountain Bike", "hot water for tea", "front window display", "a sturdy bicycle for steep trails"]


def _settings(home: Path, **kwargs) -> Settings:
    return Settings(_env_file=None, vedana_home=home, db_conn_uri=None, memgraph_uri=None, **kwargs)


def test_service_vectors_equal_in_process_ones_and_the_client_never_imports_torch(fresh_home) -> None:
    served = get_embedder(_settings(fresh_home)).embed(TEXTS)
    in_process = LocalEmbedder("all-MiniLM-L6-v2", in_process=True).embed(TEXTS)
    assert np.allclose(np.array(served), np.array(in_process), atol=1e-6)
    assert model_status(fresh_home)["running"]
    # A fresh CLI-like process reuses the warm model without importing torch.
    script = (
        "import json, sys; from vedana.config import Settings; from vedana.embeddings import get_embedder;"
        f"s = Settings(_env_file=None, vedana_home={str(fresh_home)!r});"
        "v = get_embedder(s).embed(['Mountain Bike']);"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'v': v[0]}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    result = json.loads(out.stdout)
    assert result["torch"] is False
    assert np.allclose(result["v"], in_process[0], atol=1e-6)


def test_a_killed_service_is_restarted_on_next_need(fresh_home) -> None:
    first = request(fresh_home, "all-MiniLM-L6-v2", TEXTS[:1])
    pid = model_status(fresh_home)["pid"]
    os.kill(pid, signal.SIGKILL)
    again = request(fresh_home, "all-MiniLM-L6-v2", TEXTS[:1])
    status = model_status(fresh_home)
    assert status["running"] and status["pid"] != pid
    assert np.allclose(first, again, atol=1e-6)


def test_status_and_stop_show_the_model_like_the_other_services(fresh_home) -> None:
    settings = _settings(fresh_home)
    assert services_status(settings)["model"]["state"] == "stopped"
    request(fresh_home, "all-MiniLM-L6-v2", TEXTS[:1])
    report = services_status(settings)["model"]
    assert report["state"] == "running" and report["in_use"] and report["pid"]
    assert stop_services(settings, ("model",)) == {"model": True}
    assert model_status(fresh_home)["state"] == "stopped"
    assert stop_model_service(fresh_home) is False


def test_an_idle_service_stops_by_itself(fresh_home) -> None:
    request(fresh_home, "all-MiniLM-L6-v2", TEXTS[:1], idle_s=1.0)
    deadline = time.monotonic() + 30
    while model_status(fresh_home)["running"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not model_status(fresh_home)["running"]
    assert not (fresh_home / "model" / "model.sock").exists()


def test_no_service_possible_means_in_process_said_once(tmp_path, monkeypatch, caplog) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "model").write_text("a file where the service dir should be")
    monkeypatch.setattr(local_module, "_fallback_said", False)
    embedder = get_embedder(_settings(home))
    with caplog.at_level(logging.WARNING):
        vectors = embedder.embed(TEXTS[:2]) + embedder.embed(TEXTS[2:])
        get_embedder(_settings(home)).embed(TEXTS[:1])
    said = [r for r in caplog.records if "model service" in r.getMessage()]
    assert len(said) == 1 and "loading the model in this process" in said[0].getMessage()
    in_process = LocalEmbedder("all-MiniLM-L6-v2", in_process=True).embed(TEXTS)
    assert np.allclose(vectors, in_process, atol=1e-6)


def test_idle_zero_never_starts_a_service(fresh_home) -> None:
    get_embedder(_settings(fresh_home, vedana_model_idle_s=0)).embed(TEXTS[:1])
    assert not model_status(fresh_home)["running"]
