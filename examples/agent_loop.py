"""The loop Hindsight exists for: an agent asks before it acts and reports how it went.

A small deploy agent on the `openai` client (tools: build_image, push_image, wait, deploy,
against a simulated registry that rate-limits a push right after a build). Before each step
it queries the cards for its task state; before a risky call it calls `check` and, on a
warning, does not make the call but tells the model, which changes course; after each task it
hands the run in and reports the outcome of its queries. Two passes over a task set with a
nightly between: the first pass hits the rate limit and recovers, the nightly learns from
it, the second pass acts on the warning and pushes once.

    python examples/agent_loop.py            # offline: a scripted model, a local Hindsight

Offline (the default without an LLM configured, or with --offline) the model is
examples/offline_model.py and Hindsight runs in this process on a temporary store; the
nightly runs as `hindsight nightly` on that store. With HINDSIGHT_LLM__BASE_URL (or
OPENAI_API_KEY / OPENAI_BASE_URL) set the agent uses that model (HINDSIGHT_LLM__MODEL or
OPENAI_MODEL, default gpt-4o-mini); with HINDSIGHT_URL and HINDSIGHT_API_KEY it uses that
Hindsight API, and the nightly runs on the store HINDSIGHT_DATA_DIR / HINDSIGHT_DATABASE_URL
name, which must be that server's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openai import OpenAI

from hindsight.client import CheckActionRequest, Client, OutcomeRequest, QueryRequest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # offline_model beside this file
TASK_TYPE, AGENT = "deploy_service", "agent-loop"
RISKY = {"push_image", "deploy"}  # calls checked with Hindsight before they are made
PASSES = [
    ["billing-api 2.0.0", "search-api 2.1.0", "auth-gateway 2.2.0"],
    ["payments-api 3.0.0", "user-service 3.1.0", "notifications 3.2.0"],
]
MAX_STEPS = 12
SYSTEM = (
    "You deploy services: build the image, push it to the registry, deploy it, then answer "
    "in one line. Call one tool at a time. Advice from earlier runs and warnings from the "
    "memory service come as messages: follow them."
)


def _tool(name: str, description: str, **props: str) -> dict[str, Any]:
    params = {k: {"type": "integer" if v == "int" else "string"} for k, v in props.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": params, "required": list(props)},
        },
    }


TOOLS = [
    _tool("build_image", "build the service's image", service="str", tag="str"),
    _tool("push_image", "push an image to the registry", image="str"),
    _tool("wait", "wait some seconds (lets the registry's rate limit pass)", seconds="int"),
    _tool("deploy", "deploy a pushed image", service="str", image="str"),
]


class Registry:
    """The simulated world: a push right after a build (no wait between) is rate limited."""

    def __init__(self) -> None:
        self.cooled = False
        self.pushed: set[str] = set()

    def run(self, tool: str, args: dict[str, Any]) -> tuple[Any, str | None]:
        """(observation, error) of one call."""
        if tool == "build_image":
            self.cooled = False
            return {"image": f"registry.local/{args.get('service')}:{args.get('tag')}"}, None
        if tool == "wait":
            self.cooled = True
            return f"waited {args.get('seconds', 0)}s", None
        if tool == "push_image":
            if not self.cooled:
                return None, "HTTP 429 Too Many Requests: registry rate limit, retry after 30s"
            self.pushed.add(str(args.get("image")))
            return {"digest": "sha256:0abc0"}, None
        if tool == "deploy":
            if args.get("image") not in self.pushed:
                return None, f"image {args.get('image')} not found in the registry"
            return {"status": "rolling out"}, None
        return None, f"no such tool: {tool}"


@dataclass
class TaskRun:
    """One task's run: its steps as Hindsight ingests them, errors, warnings acted on."""

    task: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    acted_on: list[str] = field(default_factory=list)
    query_ids: set[str] = field(default_factory=set)
    outcome: str = "failure"


def _state(run: TaskRun) -> dict[str, Any]:
    """The task state in Hindsight's vocabulary (docs/task-state.md), from the calls so far."""
    calls = [s for s in run.steps if s["type"] == "tool_call"]
    last = calls[-1] if calls else None
    return {
        "task_type": TASK_TYPE,
        "agent_id": AGENT,
        "step": len(calls),
        "tools_used": [c["tool"] for c in calls],
        "last_tool": last["tool"] if last else "",
        "last_error": (last.get("error") or "") if last else "",
        "error_count": sum(1 for c in calls if c.get("error")),
    }


def run_task(hs: Client, llm: OpenAI, model: str, task: str) -> TaskRun:
    """One task: ask Hindsight before each step and before risky calls; act; record."""
    run, world, heeded = TaskRun(task), Registry(), set()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Deploy {task}"},
    ]
    run.steps.append({"type": "message", "role": "user", "text": f"Deploy {task}"})
    advice = ""
    for _ in range(MAX_STEPS):
        state = _state(run)
        found = hs.query_cards(QueryRequest(task_state=state, top_k=3, prompt_tokens=300))
        if found.query_id and found.cards:
            run.query_ids.add(str(found.query_id))
        if found.prompt and found.prompt != advice:  # new advice for this state
            advice = found.prompt
            messages.append({"role": "system", "content": f"From earlier runs:\n{advice}"})
        reply = llm.chat.completions.create(model=model, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        message = reply.choices[0].message
        if not message.tool_calls:
            break
        call = message.tool_calls[0]
        tool, args = call.function.name, json.loads(call.function.arguments or "{}")
        messages.append(
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump(mode="json")]}
        )
        if tool in RISKY:
            check = hs.check_action(CheckActionRequest(tool=tool, args=args, task_state=state))
            new = [h for h in check.cards if str(h.card.card_id) not in heeded]
            if check.warnings and new:
                if check.query_id:
                    run.query_ids.add(str(check.query_id))
                heeded.update(str(h.card.card_id) for h in new)
                note = "; ".join(f"{w['mode']} -> {w['handling']}" for w in check.warnings)
                steps = " / ".join(
                    " -> ".join(a.get("tool", "?") for a in h.card.action_sequence) for h in new
                )
                run.acted_on.append(f"before {tool}: {note} (cards' steps: {steps})")
                text = f"warning, {tool} not run: {note}. Steps that worked before: {steps}."
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
                continue  # the model chooses again, with the warning in front of it
        observation, error = world.run(tool, args)
        step: dict[str, Any] = {"type": "tool_call", "tool": tool, "args": args}
        if error:
            step["error"] = error
            run.errors.append(f"{tool}: {error}")
            content = f"error {tool}: {error}"
        else:
            step["observation"] = observation
            content = f"ok {tool}: {json.dumps(observation)}"
        run.steps.append(step)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        if tool == "deploy" and not error:
            run.outcome = "success"
    return run


def report(hs: Client, run: TaskRun, tag: str) -> None:
    """Hand the run in for the nightly, and tell Hindsight how the queries' task ended."""
    hs.ingest(
        {
            "id": f"{AGENT}-{tag}-{run.task.replace(' ', '-')}",
            "task_type": TASK_TYPE,
            "agent_id": AGENT,
            "outcome": run.outcome,
            "steps": run.steps,
        }
    )
    for query_id in sorted(run.query_ids):
        hs.report_outcome(query_id, OutcomeRequest(outcome=run.outcome))  # type: ignore[arg-type]


def nightly(env: dict[str, str]) -> float:
    """`hindsight nightly` on the store (what a cron runs); the seconds it took."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "memory_cli", "nightly"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"hindsight nightly failed:\n{done.stderr[-2000:]}")
    return time.monotonic() - started


def local_hindsight(stack: ExitStack, data_dir: Path) -> tuple[str, str, dict[str, str]]:
    """A Hindsight API in this process on a new store: (url, a read-write key, the env that
    points a nightly at the same store)."""
    import socket
    import threading

    import uvicorn

    from memory_api.app import create_app
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    env = {k: v for k, v in os.environ.items() if not k.startswith("HINDSIGHT_")}
    # the holdout withholds a share of matching cards to measure their effect: off here, so
    # every warning learned shows
    env.update(HINDSIGHT_DATA_DIR=str(data_dir), HINDSIGHT_HOLDOUT__RATE="0")
    os.environ.update({k: env[k] for k in ("HINDSIGHT_DATA_DIR", "HINDSIGHT_HOLDOUT__RATE")})
    settings = Settings()
    db.upgrade(settings)
    engine = db.make_engine(settings)
    stack.callback(engine.dispose)
    key = create_key(engine=engine, namespace="default", scopes=["read", "write"], name=AGENT)[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(MemoryService(engine=engine, settings=settings))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the local Hindsight API did not start")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=15)

    stack.callback(stop)
    return f"http://127.0.0.1:{port}", key, env


def the_model(stack: ExitStack, offline: bool) -> tuple[OpenAI, str, str]:
    """(client, model, a label): the configured endpoint, else the scripted offline model."""
    base = os.environ.get("HINDSIGHT_LLM__BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get("HINDSIGHT_LLM__API_KEY") or os.environ.get("OPENAI_API_KEY")
    if not offline and (base or key):
        model = os.environ.get("HINDSIGHT_LLM__MODEL") or os.environ.get("OPENAI_MODEL")
        model = model or "gpt-4o-mini"
        return OpenAI(base_url=base, api_key=key or "none", timeout=60), model, f"{model} at {base}"
    from offline_model import OfflineModel

    scripted = stack.enter_context(OfflineModel())
    return OpenAI(base_url=scripted.url, api_key="offline"), "offline", "the scripted model"


def main(argv: list[str] | None = None) -> int:
    """Two passes over the tasks with a nightly between; prints what the agent acted on."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="the scripted model, always")
    parser.add_argument("--data-dir", type=Path, help="the local store (default: a temp dir)")
    opts = parser.parse_args(argv)
    started = time.monotonic()
    with ExitStack() as stack:
        llm, model, label = the_model(stack, opts.offline)
        url, api_key = os.environ.get("HINDSIGHT_URL"), os.environ.get("HINDSIGHT_API_KEY")
        env = dict(os.environ)
        if not (url and api_key):
            data_dir = opts.data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
            url, api_key, env = local_hindsight(stack, data_dir)
        print(f"model: {label}; hindsight: {url}")
        tag = uuid.uuid4().hex[:8]  # this invocation's runs (a shared store keeps older ones)
        hs = stack.enter_context(Client(url, api_key))
        totals = []
        for number, tasks in enumerate(PASSES, start=1):
            if number > 1:
                took = nightly(env)
                cards = hs.list_cards(status=["active"], limit=200)
                print(f"nightly: {took:.1f} s, {len(cards)} active card(s)")
            runs = [run_task(hs, llm, model, task) for task in tasks]
            for run in runs:
                report(hs, run, tag)
                print(f"pass {number}  {run.task}: {run.outcome}, {len(run.errors)} error(s)")
                for error in run.errors:
                    print(f"    error    {error}")
                for acted in run.acted_on:
                    print(f"    acted on {acted}")
            totals.append((sum(len(r.errors) for r in runs), sum(len(r.acted_on) for r in runs)))
        for number, (errors, acted) in enumerate(totals, start=1):
            print(f"pass {number}: {errors} tool error(s), {acted} warning(s) acted on")
    print(f"done in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
