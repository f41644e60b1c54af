"""The task-state vocabulary and error signatures."""

from __future__ import annotations

from memory_core.models.trajectory import Step
from memory_core.task_state import (
    error_code,
    normalise_error,
    observation_error,
    planning_state,
    states_before_calls,
)


def test_error_signatures_mask_what_varies() -> None:
    a = normalise_error("Error: payment amount does not add up, total price is 1203, but paid 833")
    b = normalise_error("Error: payment amount does not add up, total price is 608, but paid 304")
    assert a == b == "payment amount does not add up, total price is <n>, but paid <n>"
    assert normalise_error("Error: not enough balance in method gift_card_5094406") == (
        normalise_error("error: NOT enough balance in method card_77")
    )
    assert normalise_error("user 'bob' not found") == normalise_error('user "alice" not found')
    assert "<id>" in normalise_error("job 3f2b8c1e-1111-2222-3333-444455556666 failed")
    assert normalise_error("HTTP 429 Too Many Requests") == "http 429 too many requests"
    assert normalise_error("HTTP 503 Service Unavailable") != normalise_error("HTTP 429 Too Many")


def test_error_codes_and_detection() -> None:
    assert error_code("HTTP 429 Too Many Requests") == "429"
    assert error_code("status_code=503") == "503"
    assert error_code("raised KeyError: 'user'") == "KeyError"
    assert error_code("plain failure") == ""
    assert observation_error("Error: boom") == "Error: boom"
    assert observation_error('{"error": "not found"}') == "not found"
    assert observation_error('{"status": 404, "message": "gone"}') == "status 404: gone"
    assert observation_error('{"status": "ok"}') is None
    assert observation_error("4 results found") is None
    assert observation_error("Traceback (most recent call last):") is not None


def _call(i: int, tool: str, error: str | None = None) -> Step:
    return Step(index=i, type="tool_call", tool=tool, args={"i": i}, error=error)


def test_states_before_each_call() -> None:
    steps = [
        Step(index=0, type="message", role="user", text="hi"),
        _call(1, "search"),
        _call(2, "pay", "Error: HTTP 429 limit 5"),
        _call(3, "pay"),
        _call(4, "pay"),
    ]
    states = states_before_calls(steps, task_type="checkout", agent_id="a1")
    assert [s["step"] for s in states] == [0, 1, 2, 3]
    first, second, third, fourth = states
    assert first["tools_used"] == [] and first["last_tool"] == "" and first["retry_count"] == 0
    assert second["tool"] == "pay" and second["tools_used"] == ["search"]
    assert third["last_error"] == "http 429 limit <n>" and third["last_error_code"] == "429"
    assert third["retry_count"] == 1 and third["error_count"] == 1
    assert fourth["last_error"] == "" and fourth["retry_count"] == 2
    assert "tool" not in planning_state(third) and planning_state(third)["step"] == 2


def test_numbers_are_data_not_errors() -> None:
    # the real case: a calculator tool answered 408.0 and the run's cards said it "failed"
    assert observation_error("408.0") is None
    assert observation_error("404") is None
    assert observation_error("500 results") is None
    assert observation_error("failed attempts: 0") is None
    assert observation_error("HTTP 404 Not Found") == "HTTP 404 Not Found"
    assert observation_error("HTTP/1.1 503 Service Unavailable") is not None
    assert observation_error("ValueError: amount must be positive") is not None
    assert observation_error("Exception - disk full") is not None
    assert observation_error('{"status": "503", "message": "down"}') == "status 503: down"
    assert observation_error('{"exception": "KeyError: x"}') == "KeyError: x"
    assert observation_error('{"status": 200, "value": 408}') is None


def test_real_calculator_result_is_not_an_error() -> None:
    from memory_core.ingest.formats import parse_record

    record = {
        "reward": 1.0,
        "messages": [
            {"role": "user", "content": "what is the total?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c1",
                        "function": {"name": "calculate", "arguments": '{"expression": "204*2"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "calculate", "content": "408.0"},
        ],
    }
    t = parse_record(record, name="r", namespace="n", task_type="default")
    (call,) = [s for s in t.steps if s.type == "tool_call"]
    assert call.observation == "408.0" and call.error is None


def test_a_list_of_suggestions_is_one_signature_however_long() -> None:
    from memory_core.task_state import error_signature

    def err(n: int) -> str:
        names = ", ".join(f"'Name {i}'" for i in range(n))
        return f"Could not find [Foo Bar]. Similar: [{names}]."

    ten = error_signature(err(10), {"entity": "Foo Bar"})
    assert ten == error_signature(err(7), {"entity": "Foo Bar"})
    assert ten == error_signature(err(3).replace("Foo Bar", "Baz Qux"), {"entity": "Baz Qux"})
    assert ten == "could not find <list>. similar: <list>."
    assert error_signature("Error: ids 12, 17, 40 are unknown") == "ids <list> are unknown"
    # a list cut at the line's end is still a list
    assert error_signature("Error: similar: ['a', 'b', 'c") == "similar: <list>"


def test_a_number_with_its_unit_signs_as_docs_task_state_says() -> None:
    """docs/task-state.md (Errors): a number with its unit is one quantity however written."""
    from memory_core.task_state import normalise_error

    said = {
        "retry after 30s": "retry after <n> s",
        "retry after 12 s": "retry after <n> s",
        "retry after 2.5s": "retry after <n> s",
        "retry after 30 seconds": "retry after <n> s",
        "took 1,200ms": "took <n> ms",
        "upload of 12.5 MB over the 10MB limit": "upload of <n> mb over the <n> mb limit",
        "seat 12B taken": "seat <id> taken",  # a single letter other than s is no unit
        "seat 12A taken": "seat <id> taken",
        "HTTP 429 Too Many Requests": "http 429 too many requests",
    }
    assert {text: normalise_error(text) for text in said} == said
