"""The `hindsight` command as a user runs it, on SQLite and PostgreSQL: in this process, and a
real subprocess for the commands that run a flow (tests.helpers.cli)."""

from __future__ import annotations

import json

from tests.helpers.cli import hindsight
from tests.helpers.data import REPO, tau_path


def test_ingest_from_stdin_twice_then_status(env_for) -> None:
    lines = [
        json.dumps(
            {
                "id": f"t{i}",
                "task_type": "report",
                "outcome": "success",
                "steps": [
                    {
                        "type": "tool_call",
                        "tool": "fetch",
                        "args": {"page": i},
                        "error": "HTTP 503 busy",
                    },
                    {
                        "type": "tool_call",
                        "tool": "fetch",
                        "args": {"page": i},
                        "observation": "ok",
                    },
                ],
            }
        )
        for i in range(3)
    ]
    out = hindsight(env_for, "ingest", "-", "--format", "json", stdin="\n".join(lines))
    assert json.loads(out.stdout) == {"stored": 3, "duplicates": 0, "refused": []}
    again = hindsight(env_for, "ingest", "-", "-f", "json", stdin="\n".join(lines))
    assert json.loads(again.stdout)["duplicates"] == 3
    status = json.loads(hindsight(env_for, "status", "-f", "json").stdout)
    assert status == {"trajectories": {"pending": 3}, "cards": {}}


def test_bad_input_exits_2_and_names_record_and_field(env_for, tmp_path) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps([{"steps": [{"type": "tool_call"}]}]))
    proc = hindsight(env_for, "ingest", str(f), check=False)
    assert proc.returncode == 2
    assert f"record {f}[0], field 'steps.0.tool'" in proc.stdout.replace("\n", "")
    missing = hindsight(env_for, "ingest", str(tmp_path / "nope"), check=False)
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr
    bad_state = hindsight(env_for, "cards", "query", "--state", "{oops", check=False)
    assert bad_state.returncode == 2 and "field 'state'" in bad_state.stderr
    bad_id = hindsight(env_for, "cards", "show", "not-a-uuid", check=False)
    assert bad_id.returncode == 2 and "not a card id" in bad_id.stderr


def test_nightly_then_list_show_and_query(env_for, engine, settings, prefect_api) -> None:
    out = hindsight({**env_for, **prefect_api}, "nightly", "--input", str(REPO / "examples"))
    assert "hindsight cards query --state" in out.stdout
    assert "deploy_service" in out.stdout  # the learned cards' table
    assert "live cards (active or in review) in namespace 'default'" in out.stdout
    listed = json.loads(hindsight(env_for, "cards", "list", "-f", "json").stdout)
    assert listed and {c["status"] for c in listed} <= {"active", "review"}
    assert "validated 15 drafts" in out.stdout
    warning = next(c for c in listed if 'tool == "push_image"' in c["preconditions"])
    shown = json.loads(hindsight(env_for, "cards", "show", warning["card_id"], "-f", "json").stdout)
    assert shown["evidence"] and shown["evidence"][0]["condition"]["tool"] == "push_image"
    state = json.dumps({"task_type": "DEPLOY_SERVICE", "tool": "push_image"})
    hits = json.loads(
        hindsight(env_for, "cards", "query", "--state", state, "--explain", "-f", "json").stdout
    )
    assert hits[0]["card"]["card_id"] == warning["card_id"]
    assert all(c["verdict"] == "held" for h in hits for c in h["checks"])
    assert hits == sorted(hits, key=lambda h: -h["score"]["score"])
    # an agent asking the API (the same service in process) gets the same cards in this order
    text = hindsight(env_for, "cards", "query", "--state", state, "--text", "image", "-f", "json")
    served = _served(engine, settings, json.loads(state), "image")
    assert [h["card"]["card_id"] for h in json.loads(text.stdout)] == served
    report = json.loads(hindsight(env_for, "validate", "report", "-f", "json").stdout)
    assert report["evaluated"] == 15 and report["rejected"] == 0
    assert report["docs_path"].endswith("index.html")
    queue = json.loads(hindsight(env_for, "review", "list", "-f", "json").stdout)
    assert {c["status"] for c in queue} <= {"review"}
    none = json.loads(
        hindsight(
            env_for, "cards", "query", "--state", json.dumps({"tool": "push_image"}), "-f", "json"
        ).stdout
    )
    assert none == []  # the task type is part of the lesson; without it nothing applies


def _served(engine, settings, state: dict, text: str) -> list[str]:
    from memory_core.serve.keys import create_key
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService

    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(create_key(engine=engine, namespace="default", scopes=["read"])[1])
    request = QueryRequest(task_state=state, query=text, record_use=False)
    return [str(h.card.card_id) for h in svc.query(principal=who, request=request).cards]


def test_retrospect_command_on_tau(env_for) -> None:
    hindsight(env_for, "ingest", str(tau_path()))
    out = json.loads(hindsight(env_for, "retrospect", "-f", "json").stdout)
    assert out["trajectories"] == 140 and out["cards_created"] > 5


def test_llm_failures_become_dead_letters_an_operator_can_redrive(env_for, prefect_api) -> None:
    from tests.helpers import fake_model
    from tests.helpers.scripted_llm import Reply, ScriptedLLM

    run = {"id": "dl-1", "steps": [{"type": "tool_call", "tool": "fetch", "error": "HTTP 503"}]}
    hindsight(env_for, "ingest", "-", stdin=json.dumps(run))
    with ScriptedLLM(lambda body, n: Reply(status=500, error="down")) as server:
        env = {
            **env_for,
            **prefect_api,
            "HINDSIGHT_LLM__BASE_URL": server.url,
            "HINDSIGHT_LLM__MODEL": "m",
            "HINDSIGHT_LLM__RETRY_DELAYS_S": "[0.05]",
            "HINDSIGHT_LLM__MODE": "instead",
        }
        failed = hindsight(env, "retrospect", "-f", "json", check=False)
        assert failed.returncode == 1, failed.stderr[-2000:]  # a dead letter: cron notices
        out = json.loads(failed.stdout)
        assert out["dead_letters"] == 1 and len(server.requests) == 2
        listed = json.loads(hindsight(env, "dead-letters", "list", "-f", "json").stdout)
        assert [d["key"] for d in listed] == ["dl-1"] and "after 2 tries" in listed[0]["error"]
        assert "1 dead letter(s) back" in hindsight(env, "dead-letters", "redrive", "dl-1").stdout
        server.responder = fake_model.respond
        again = json.loads(hindsight(env, "retrospect", "-f", "json").stdout)
    assert again["trajectories"] == 1 and again["cards_created"] == 1
    assert json.loads(hindsight(env_for, "dead-letters", "list", "-f", "json").stdout) == []
