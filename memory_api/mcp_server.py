"""The MCP server: the same service as the read API, as tools a model can decide to call.

Over stdio the key comes from the environment once (the client launched us); over streamable
HTTP every request carries `Authorization: Bearer <key>`, checked before MCP sees it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from memory_core.decay.feedback import Feedback
from memory_core.effects.cards import judged_all
from memory_core.errors import HindsightError, InvalidInput
from memory_core.facts.as_of import parse_as_of
from memory_core.facts.search import FactHit
from memory_core.facts.store import FactIn
from memory_core.models.card import ActionStep, CardPublic, FailureMode
from memory_core.serve.keys import Principal
from memory_core.serve.schemas import (
    CardIn,
    CheckActionRequest,
    CheckActionResult,
    FeedbackRequest,
    QueryRequest,
    QueryResult,
)
from memory_core.serve.service import MemoryService

T = TypeVar("T")
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
INSTRUCTIONS = (
    "Hindsight remembers what worked and what failed in earlier agent runs. At planning time "
    "call query_memory_cards with your task state; before a risky tool call, call check_action; "
    "after the task, report the outcome with update_card_confidence. Facts about users and "
    "projects: memory_search, memory_write, memory_forget."
)


def bearer(headers: Any) -> str | None:
    """The key in an Authorization header, if any."""
    value = headers.get("authorization") if headers else None
    if value and value[:7].lower() == "bearer ":
        return str(value[7:].strip())
    return None


def create_mcp(
    service: MemoryService, *, principal: Principal | None = None, write_tools: bool = True
) -> MCPServer:
    """The tools over one service; `principal` fixes the caller (stdio), else each request's
    bearer key decides (HTTP)."""
    mcp: MCPServer = MCPServer("hindsight", instructions=INSTRUCTIONS, version="0.1.0")

    def call(ctx: Context, fn: Callable[[Principal], T]) -> T:
        """Run fn as the caller; Hindsight errors and invalid input become tool errors."""
        try:
            who = principal if principal is not None else service.authenticate(bearer(ctx.headers))
            return fn(who)
        except HindsightError as exc:
            raise ToolError(f"{type(exc).__name__.lower()}: {exc}") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ToolError(f"invalid input: {where}: {first['msg']}") from exc

    @mcp.tool(annotations=READ)
    def query_memory_cards(
        ctx: Context,
        task_state: Annotated[
            dict[str, Any],
            Field(
                description="what is true now: task_type, tools_used, last_tool, last_error, "
                "last_error_code, error_count, retry_count, step, and tool/args before a call"
            ),
        ],
        query: Annotated[str | None, Field(description="free text", max_length=2000)] = None,
        top_k: Annotated[int, Field(ge=1, le=50)] = 5,
        explain: bool = False,
        prompt_tokens: Annotated[int | None, Field(ge=16, le=8000)] = None,
    ) -> QueryResult:
        """Experience cards that apply to the current task state, best first: what to do
        (action_sequence), what can go wrong and how to handle it (failure_modes). Call it
        when planning a task or after an error. prompt_tokens returns a ready-to-use prompt
        block; explain shows which preconditions held."""
        return call(
            ctx,
            lambda who: service.query(
                principal=who,
                request=QueryRequest(
                    task_state=task_state,
                    query=query,
                    top_k=top_k,
                    explain=explain,
                    prompt_tokens=prompt_tokens,
                ),
                via="mcp",
            ),
        )

    @mcp.tool(annotations=READ)
    def check_action(
        ctx: Context,
        tool: Annotated[str, Field(min_length=1, max_length=256, description="tool to call")],
        args: Annotated[dict[str, Any] | None, Field(description="its arguments")] = None,
        task_state: Annotated[dict[str, Any] | None, Field(description="state so far")] = None,
    ) -> CheckActionResult:
        """Before calling a tool: what went wrong before with this call, and how to avoid it.
        Returns the failure modes of cards keyed on this tool and arguments (empty: no
        known trouble)."""
        return call(
            ctx,
            lambda who: service.check_action(
                principal=who,
                request=CheckActionRequest(tool=tool, args=args or {}, task_state=task_state or {}),
                via="mcp",
            ),
        )

    @mcp.tool(annotations=READ)
    def list_recent_cards(
        ctx: Context, limit: Annotated[int, Field(ge=1, le=200)] = 10
    ) -> list[CardPublic]:
        """The most recently learnt or changed experience cards of this namespace."""
        rules = service.settings.decay.effects  # the configured rules judge each effect
        cards = call(ctx, lambda who: service.recent(principal=who, limit=limit))
        return judged_all(cards, engine=service.engine, rules=rules)

    @mcp.tool(annotations=READ)
    def memory_search(
        ctx: Context,
        text: Annotated[str, Field(min_length=1, max_length=2000, description="the question")],
        top_k: Annotated[int, Field(ge=1, le=50)] = 5,
        include_claims: Annotated[
            bool,
            Field(
                description="also what only a speaker said (standing 'claim', with its speaker): "
                "their word, unchecked; never treat a claim as established"
            ),
        ] = False,
        as_of: Annotated[
            str | None,
            Field(description="an ISO date or date and time (UTC): what was true then"),
        ] = None,
    ) -> list[FactHit]:
        """Search remembered facts (about users, projects, environments) by keywords. Use it
        before asking the user something they may have said already. Each fact's `standing`
        says what stands behind it: `corroborated` (a tool result or another speaker agreed),
        `operator` (written through a key); claims come only with include_claims."""
        return call(
            ctx,
            lambda who: service.search_facts(
                principal=who,
                text=text,
                top_k=top_k,
                include_claims=include_claims,
                as_of=parse_as_of(as_of) if as_of else None,
            ),
        )

    @mcp.tool(annotations=WRITE)
    def update_card_confidence(
        ctx: Context,
        card_id: uuid.UUID,
        outcome: Literal["success", "failure"],
        use_id: Annotated[
            uuid.UUID | None, Field(description="the use_id query_memory_cards returned")
        ] = None,
    ) -> Feedback:
        """After a task: report whether following a card worked. Success raises its
        confidence, failure lowers it; repeated failures send it to human review. Pass the
        use_id query_memory_cards returned (without one the key needs write scope)."""
        return call(
            ctx,
            lambda who: service.feedback(
                principal=who,
                card_id=card_id,
                request=FeedbackRequest(outcome=outcome, use_id=use_id),
            ),
        )

    if not write_tools:
        return mcp

    @mcp.tool(annotations=WRITE)
    def store_memory_card(
        ctx: Context,
        scenario: Annotated[str, Field(min_length=1, max_length=500)],
        action_sequence: Annotated[list[ActionStep], Field(min_length=1, max_length=12)],
        preconditions: Annotated[
            list[str],
            Field(description='CEL over the task state, e.g. tool == "search"', max_length=12),
        ],
        failure_modes: list[FailureMode] | None = None,
        expected_outcome: str = "",
        confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.6,
        applies_everywhere: Annotated[
            bool,
            Field(description="meant for every state (preconditions that pick none, e.g. [])"),
        ] = False,
    ) -> CardPublic:
        """Store a lesson learnt (write keys only): when the preconditions hold, take these
        steps; these failure modes are known. Checked like nightly cards; below confidence
        0.5 it waits for human review. Preconditions that hold on every state are refused
        unless applies_everywhere is true."""
        return call(
            ctx,
            lambda who: service.store_card(
                principal=who,
                card=CardIn(
                    scenario=scenario,
                    preconditions=preconditions,
                    action_sequence=action_sequence,
                    failure_modes=failure_modes or [],
                    expected_outcome=expected_outcome,
                    confidence=confidence,
                    applies_everywhere=applies_everywhere,
                ),
                via="mcp",
            ),
        )

    @mcp.tool(annotations=WRITE)
    def memory_write(
        ctx: Context,
        key: Annotated[str, Field(min_length=1, max_length=256, description="whom it is about")],
        value: Annotated[str, Field(min_length=1, max_length=2000, description="the fact")],
        query: Annotated[str | None, Field(max_length=1000, description="what it answers")] = None,
    ) -> CardPublic:
        """Remember a fact (write keys only). A newer value for the same key and question
        replaces the older one, which stays in history. A non-admin key's fact waits in
        review until a person approves it (status "review")."""
        return call(
            ctx,
            lambda who: service.write_fact(
                principal=who, fact=FactIn(key=key, value=value, query=query, source={"via": "mcp"})
            ),
        )

    @mcp.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    def memory_forget(ctx: Context, fact_id: uuid.UUID) -> CardPublic:
        """Forget a fact that is wrong or must not be kept (write keys only)."""
        return call(ctx, lambda who: service.forget_fact(principal=who, fact_id=fact_id))

    @mcp.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    def namespace_delete(
        ctx: Context,
        confirm: Annotated[str, Field(description="the key's namespace, typed out")],
    ) -> dict[str, Any]:
        """Delete this key's whole namespace: every card, fact, trajectory, use and key (admin
        keys only; `confirm` must name the namespace). Nothing of it can be read afterwards."""

        def run(who: Principal) -> dict[str, Any]:
            who.require("admin")
            if confirm != who.namespace:
                raise InvalidInput("confirm must be this key's namespace", field="confirm")
            out = service.delete_namespace(principal=who)
            return {"namespace": who.namespace, "rows": out.rows, "vectors": out.vectors}

        return call(ctx, run)

    return mcp
