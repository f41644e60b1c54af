"""Recall over stored messages: each turn a memory item, found with its neighbours' words."""

from __future__ import annotations

import json

from memory_core.ingest.store import ingest
from memory_core.recall import RecallIndex, load_items, search_memory
from tests.helpers.cli import hindsight


def _conversation() -> dict:
    return {
        "id": "c1",
        "conversation": {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "What did you do at the weekend?"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "I went sailing on the lake."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "Lovely. I painted all day."},
            ],
            "session_2_date_time": "9:00 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "My new job starts on Monday."},
            ],
        },
    }


def test_turns_are_items_with_date_and_speaker(engine) -> None:
    ingest(engine=engine, records=[("c1", _conversation())], namespace="n", task_type="default")
    items = load_items(engine=engine, namespace="n")
    assert [i.turn_id for i in items] == ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert items[1].rendered() == "[1:56 pm on 8 May, 2023] Bob: I went sailing on the lake."
    index = RecallIndex(items=items)  # keywords only
    assert index.prev.tolist() == [False, True, True, False]  # a new session is not context
    # the answer is in the reply: the question's words sit in the turn before it
    alone = index.rankings(text="weekend")
    assert [items[i].turn_id for i in alone["keyword_turn"]] == ["D1:1"]
    found = [h.item.turn_id for h in index.search(text="weekend", top_k=3)]
    assert found[0] == "D1:1" and "D1:2" in found and "D2:1" not in found
    assert search_memory(engine=engine, namespace="n", text="new job", top_k=1)[0].item.turn_id == (
        "D2:1"
    )
    assert search_memory(engine=engine, namespace="other", text="job") == []


def test_memory_search_command(env_for, tmp_path) -> None:
    conv = tmp_path / "conversation.json"
    conv.write_text(json.dumps(_conversation()))
    hindsight(env_for, "ingest", str(conv), "--namespace", "talk")
    out = hindsight(env_for, "memory", "search", "sailing", "--namespace", "talk", "-f", "json")
    hits = json.loads(out.stdout)
    assert hits[0]["turn_id"] == "D1:2" and hits[0]["speaker"] == "Bob"
    assert hits[0]["said_at"].startswith("2023-05-08T13:56")
    assert hits[0]["text"] == "I went sailing on the lake." and hits[0]["score"] > 0
    keywords_only = {**env_for, "HINDSIGHT_EMBEDDING__PROVIDER": "none"}
    shown = hindsight(keywords_only, "memory", "search", "new job", "--namespace", "talk")
    assert shown.stderr.count("keywords only") == 1
    assert "9:00 am on 20 June, 2023" in shown.stdout and "My new job starts" in shown.stdout
    top1 = hindsight(
        keywords_only,
        "memory",
        "search",
        "job",
        "--namespace",
        "talk",
        "--top-k",
        "1",
        "-f",
        "json",
    )
    assert [h["turn_id"] for h in json.loads(top1.stdout)] == ["D2:1"]
    empty = hindsight(keywords_only, "memory", "search", "job", "-f", "json")  # default namespace
    assert json.loads(empty.stdout) == []
