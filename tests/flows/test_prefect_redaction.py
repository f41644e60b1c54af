"""A secret the agent handed in never reaches the Prefect UI: a night with the LLM down parks
a run named by a credential and whose tool error holds another; the artifacts, logs, states and
task run names of the real flow run show both redacted."""

from __future__ import annotations

import json
import logging
import secrets
import string

import pytest

from flows.nightly import nightly
from flows.params import NightlyParams
from flows.redacted import RUN_LOGGERS
from memory_core.redact import MARKER
from tests.helpers.prefect_runs import read_run
from tests.helpers.scripted_llm import Reply


def _token(n: int) -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def test_a_parked_run_named_by_a_secret_shows_redacted(llm_env, tmp_path) -> None:
    key_secret, error_secret = "sk-" + _token(48), "ghp_" + _token(36)
    proxy_secret = "sk-proj-" + _token(56)
    # the server is down, and its error quotes what it was sent (the prompt: redacted) and the
    # key it was given (a proxy's key, as some quote it)
    llm_env(
        lambda body, n: Reply(
            status=500,
            error=f"down (key {proxy_secret}): " + body["messages"][-1]["content"],
        )
    )
    run = {
        "id": f"deploy with OPENAI_API_KEY={key_secret}",
        "messages": [
            {"role": "user", "content": "ship the release"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "push", "arguments": json.dumps({"tag": "v1"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": f"Error: refused {error_secret}"},
            {"role": "assistant", "content": "the push failed"},
        ],
    }
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "run.json").write_text(json.dumps(run))
    state = nightly(NightlyParams(input=[str(tmp_path / "in")]), return_state=True)
    assert state.is_failed()  # the run was parked: its key is in the dead-letter artifact
    read = read_run(state.state_details.flow_run_id)
    seen = "\n".join(t for texts in read.values() for t in texts)
    assert key_secret not in seen and error_secret not in seen and proxy_secret not in seen
    dead = [a for a in read["artifacts"] if a.startswith("nightly-dead-letters")]
    assert dead and f"deploy with {MARKER}" in dead[0], [a[:200] for a in read["artifacts"]]
    assert any("llm-extract deploy with" in t and MARKER in t for t in read["task_runs"])


@pytest.mark.filterwarnings("ignore:Logger 'prefect.task_runs' attempted to send logs")
def test_run_log_lines_and_tracebacks_are_redacted() -> None:
    """Outside a run (no API to send to): the run logger's own lines, as a handler formats them."""
    token = "ghp_" + _token(36)
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(logging.Formatter().format(record))  # type: ignore[method-assign]
    logger = logging.getLogger(RUN_LOGGERS[1])
    logger.addHandler(handler)
    try:
        logger.warning("run %s failed", f"git clone https://{token}@github.com/a/b")
        try:
            raise RuntimeError(f"token {token} refused")
        except RuntimeError:
            logger.exception("stage failed")
    finally:
        logger.removeHandler(handler)
    text = "\n".join(lines)
    assert len(lines) == 2 and "Traceback" in text
    assert token not in text and text.count(MARKER) >= 2
