"""A scripted OpenAI-compatible chat server for agent_loop.py's offline mode (no model, no
network): it stands in for the LLM only, over real HTTP, so the `openai` client is real.

Its policy is a fixed plan with two rules a reasonable model would follow:
* the plan: build_image, push_image, deploy, then a final answer;
* when the last tool message is an error or a warning that names a helper tool ("wait") or
  says "retry after N s", call the helper first (with the seconds the text gives), then go
  back to the plan; an error saying neither is retried as is.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PLAN = ["build_image", "push_image", "deploy"]
HELPERS = ["wait"]  # tools outside the plan that an error or warning may call for


def _args(tool: str, task: str, text: str = "") -> dict[str, Any]:
    service, _, version = task.partition(" ")
    image = f"registry.local/{service}:{version}"
    if tool == "build_image":
        return {"service": service, "tag": version}
    if tool == "push_image":
        return {"image": image}
    if tool == "deploy":
        return {"service": service, "image": image}
    seconds = re.search(r"(\d+)\s*s", text)
    return {"seconds": int(seconds.group(1)) if seconds else 30}


def decide(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The next assistant message for a conversation: a tool call or the final answer."""
    task = next(m["content"] for m in messages if m["role"] == "user").removeprefix("Deploy ")
    done = [m["content"] for m in messages if m["role"] == "tool" and m["content"].startswith("ok")]
    last = messages[-1]
    if last["role"] == "tool" and not last["content"].startswith("ok"):
        text = last["content"]
        helper = next((t for t in HELPERS if re.search(rf"\b{t}\b", text, re.I)), None)
        if helper is None and re.search(r"retry after \d+", text, re.I):
            helper = "wait"
        if helper:
            return _call(helper, _args(helper, task, text))
    finished = {m.split()[1].rstrip(":") for m in done}  # "ok <tool>: ..."
    for tool in PLAN:
        if tool not in finished:
            return _call(tool, _args(tool, task))
    return {"role": "assistant", "content": f"deployed {task}"}


def _call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    call_id = f"call_{tool}_{time.monotonic_ns()}"
    function = {"name": tool, "arguments": json.dumps(args)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


class OfflineModel:
    """`with OfflineModel() as model:` serves POST /v1/chat/completions on model.url."""

    def __enter__(self) -> OfflineModel:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                message = decide(body["messages"])
                reason = "tool_calls" if message.get("tool_calls") else "stop"
                answer = {
                    "id": "offline",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "offline"),
                    "choices": [{"index": 0, "message": message, "finish_reason": reason}],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
