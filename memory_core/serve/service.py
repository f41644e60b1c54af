"""The one service the read API and the MCP server call: every operation takes the caller's
principal, checks its scope, and works only inside the principal's namespace.

Layer: service.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import text
from sqlalchemy.engine import Engine

from memory_core.db import READ_ONLY, refresh_statistics
from memory_core.effects.holdout import split_arms
from memory_core.models.card import CardPublic
from memory_core.models.columns import random_row_id, utcnow
from memory_core.namespaces.delete import Deletion, delete_namespace
from memory_core.serve.agent_state import as_ingested, unread
from memory_core.serve.answer import (
    Answer,
    Hit,
    RowsNotInMemory,
    answer_json,
    card_hits,
    check_json,
    plain_json,
    warnings,
)
from memory_core.serve.effect_ops import EffectOperations
from memory_core.serve.inline import InlineGate
from memory_core.serve.keys import KeyRing, Principal
from memory_core.serve.prompt_block import prompt_block
from memory_core.serve.reads import ReadOperations
from memory_core.serve.retrieval import Ranked, public_checks, retrieve
from memory_core.serve.schemas import (
    CheckActionRequest,
    CheckActionResult,
    Demoted,
    Explanation,
    NearMiss,
    QueryRequest,
    QueryResult,
    UnreadVariable,
)
from memory_core.serve.served_rows import ServedRows
from memory_core.serve.snapshot import (
    Snapshot,
    row_json,
    used,
)
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.serve.uses import UseRecorder
from memory_core.serve.writes import WriteOperations
from memory_core.settings import Settings

log = logging.getLogger(__name__)
_PRE_CALL = frozenset({"tool", "args"})
_DATETIME = TypeAdapter(datetime)


class MemoryService(ReadOperations, WriteOperations, EffectOperations):
    """Retrieval, reads and writes of one database, for many namespaces."""

    def __init__(self, *, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.snapshots = SnapshotCache(
            engine=engine,
            refresh_s=settings.serve.snapshot_refresh_s,
            max_cards=settings.serve.max_cached_cards,
            poll=True,
        )
        self.rows = ServedRows(engine=engine, settings=settings)
        self.snapshots.on_change = self.rows.refill
        self.uses = UseRecorder(engine=engine, flush_s=settings.serve.use_flush_s)
        # a revocation anywhere is heard from the change feed within the refresh interval
        self.keys = KeyRing(
            engine=engine,
            cache_s=settings.serve.key_cache_s,
            feed=self.snapshots,
            trust_s=settings.serve.snapshot_refresh_s,
        )
        self.snapshots.on_keys = self.keys.forget
        self.uses.also.append(self.keys.write_uses)  # keys' last uses, off the request path
        self.inline = InlineGate(
            budget_s=settings.serve.inline_budget_ms / 1000,
            fresh_s=settings.serve.snapshot_refresh_s,
        )

    def start(self) -> None:
        """Start the background use writer (after SQLite's planner statistics are fresh)."""
        refresh_statistics(self.engine)
        self.uses.start()

    def close(self) -> None:
        """Write pending uses and stop (the feed's thread too)."""
        self.uses.close()
        self.snapshots.close()

    def authenticate(self, secret: str | None) -> Principal:
        """The caller behind a key (Unauthorized when there is none)."""
        return self.keys.verify(secret)

    def ready(self) -> dict[str, Any]:
        """Readiness: the database answers and uses are being written."""
        with self.engine.connect().execution_options(**READ_ONLY) as conn:
            conn.execute(text("SELECT 1"))
        return {
            "database": "ok",
            "uses_written": self.uses.written,
            "uses_pending": self.uses.pending,
            "use_writer": (self.uses.last_error or "ok"),
        }

    # -- retrieval ---------------------------------------------------------------------

    def query(
        self, *, principal: Principal, request: QueryRequest, via: str = "api"
    ) -> QueryResult:
        """Cards whose preconditions hold on the task state, best first (explained on request)."""
        principal.require("read")
        return self.result(self._retrieve(principal, request, via=via), request)

    @staticmethod
    def result(answer: Answer, request: QueryRequest) -> QueryResult:
        """The answer as the API's models (explained, with a prompt block, as asked)."""
        retrieval = answer.retrieval
        result = QueryResult(
            cards=card_hits(answer.hits, explain=request.explain), query_id=answer.query_id
        )
        if request.prompt_tokens is not None:
            result.prompt = prompt_block(
                [h.card for h in result.cards], max_tokens=request.prompt_tokens
            )
        if request.explain:
            result.explain = Explanation(
                active_cards=retrieval.active_cards,
                candidates=retrieval.candidates,
                near_misses=[
                    NearMiss(
                        card_id=m.entry.card_id,
                        scenario=m.entry.scenario,
                        checks=public_checks(m.checks),
                        score=m.score,
                    )
                    for m in retrieval.near_misses
                ],
                unread_variables=[
                    UnreadVariable(name=name, did_you_mean=near)
                    for name, near in answer.unread or ()
                ],
                demoted=[Demoted(card_id=c, reason=r) for c, r in retrieval.demoted.items()],
            )
        return result

    def query_json(self, *, principal: Principal, request: QueryRequest, via: str = "api") -> bytes:
        """`query` as JSON, the same as `query(...).model_dump_json()` parses to, written from
        the served rows' JSON and retrieval's objects without model round trips."""
        principal.require("read")
        snap = self.snapshots.get(principal.namespace)
        plain = not request.explain and request.prompt_tokens is None
        started = time.thread_time()  # the feed read above never runs inline: not timed
        answer = self._retrieve(principal, request, via=via, snap=snap)
        if plain:
            self.inline.saw(principal.namespace, snap, time.thread_time() - started)
            return plain_json(answer)
        prompt = None
        if request.prompt_tokens is not None:
            cards = [CardPublic.model_validate_json(h.card) for h in answer.hits]
            prompt = prompt_block(cards, max_tokens=request.prompt_tokens)
        return answer_json(answer, explain=request.explain, prompt=prompt)

    def query_json_now(
        self, *, principal: Principal, request: QueryRequest, via: str = "api"
    ) -> bytes | None:
        """`query_json` answered on this thread when it is known to be quick (memory_core/serve/
        inline.py says when), else None and nothing done: the caller hops to a worker thread."""
        if request.explain or request.prompt_tokens is not None:
            return None
        snap = self.inline.warm(principal.namespace)
        if snap is None:
            return None
        principal.require("read")
        self.snapshots.touch(principal.namespace)  # its place in the eviction order
        # the thread's CPU clock, not the wall clock: on a loaded machine a preempted query
        # would read as slow, and the namespace would go to worker threads, which cost more
        started = time.thread_time()
        try:
            answer = self._retrieve(principal, request, via=via, snap=snap, rows_in_memory=True)
        except RowsNotInMemory:
            return None
        self.inline.saw(principal.namespace, snap, time.thread_time() - started)
        return plain_json(answer)

    def _retrieve(
        self,
        principal: Principal,
        request: QueryRequest,
        *,
        via: str,
        needs: frozenset[str] = frozenset(),
        snap: Snapshot | None = None,
        rows_in_memory: bool = False,
    ) -> Answer:
        started = time.perf_counter()  # the query log's latency: retrieval up to the use
        ns = principal.namespace
        snap = self.snapshots.get(ns) if snap is None else snap
        now = utcnow()
        state = as_ingested(request.task_state)  # the raw error an agent got, signed as ingest does
        retrieval = retrieve(
            snapshot=snap,
            state=state,
            now=now,
            top_k=request.top_k if not needs else max(request.top_k * 4, 20),
            weights=self.settings.ranking,
            query=request.query,
            explain=request.explain,
            near_misses=self.settings.serve.near_misses,
        )
        matches = retrieval.matches
        if needs:  # only cards keyed on the call about to be made
            matches = [m for m in matches if any(c.variables & needs for c in m.entry.compiled)]
        matches = matches[: request.top_k]
        withheld: list[Ranked] = []
        query_id = random_row_id() if request.record_use else None
        if query_id is not None:  # the holdout: only a recorded use can measure an effect
            matches, withheld = split_arms(
                matches,
                card_id=lambda m: m.entry.card_id,
                pinned=lambda m: m.entry.pinned,
                seed=self.settings.holdout.seed,
                key=request.run_id or query_id.hex,
                rate=self.settings.holdout.rate_for(ns),
            )
        ids = [m.entry.card_id for m in matches]
        if rows_in_memory and any(cid not in snap.rows for cid in ids):
            raise RowsNotInMemory  # nothing recorded yet: the worker thread starts over
        rows = self.rows.get(snap, ids)
        matches = [m for m in matches if m.entry.card_id in rows]
        # the cards as they were before this use (the rows are updated below)
        hits = [Hit(m, row_json(rows[m.entry.card_id])) for m in matches]
        if request.record_use and (matches or withheld):
            scores = {m.entry.card_id: m.score.score for m in (*matches, *withheld)}
            use_ids = self.uses.record(
                namespace=ns,
                card_ids=[m.entry.card_id for m in matches],
                state=state,
                via=via,
                now=now,
                withheld=[m.entry.card_id for m in withheld],
                query_id=query_id,
                asked=(principal.key_id, (time.perf_counter() - started) * 1000, scores),
            )
            used_at = _DATETIME.dump_python(now, mode="json")
            for h in hits:  # ranking follows the uses before the rows are written
                e = h.match.entry
                h.use_id = use_ids.get(e.card_id)
                used(e, now)
                snap.max_uses = max(snap.max_uses, e.use_count)
                # what the use writer is about to write, so the served row stays current
                head, n, _, _ = rows[e.card_id]
                snap.rows[e.card_id] = (head, n + 1, used_at, 0)
        answer = Answer(hits, retrieval, query_id)
        if request.explain:  # names the agent sent that no card reads (a typo, another vocabulary)
            answer.unread = unread(request.task_state, snap.index.readers)
        return answer

    def check_action(
        self, *, principal: Principal, request: CheckActionRequest, via: str = "api"
    ) -> CheckActionResult:
        """Cards keyed on this call (tool, args) and their failure modes: warnings before it."""
        answer = self._check(principal, request, via=via)
        return CheckActionResult(
            tool=request.tool,
            warnings=warnings(answer.hits, answer.retrieval.demoted),
            cards=card_hits(answer.hits, explain=False),
            query_id=answer.query_id,
        )

    def check_action_json(
        self, *, principal: Principal, request: CheckActionRequest, via: str = "api"
    ) -> bytes:
        """`check_action` as JSON, written without model round trips (as `query_json`)."""
        return check_json(request.tool, self._check(principal, request, via=via))

    def _check(self, principal: Principal, request: CheckActionRequest, *, via: str) -> Answer:
        state = {**request.task_state, "tool": request.tool, "args": request.args}
        q = QueryRequest(task_state=state, top_k=request.top_k)
        principal.require("read")
        return self._retrieve(principal, q, via=via, needs=_PRE_CALL)

    def delete_namespace(self, *, principal: Principal) -> Deletion:
        """Delete the key's namespace and all it holds, the key included (admin scope)."""
        principal.require("admin")
        out = delete_namespace(
            engine=self.engine,
            settings=self.settings,
            namespace=principal.namespace,
            actor=principal.actor,
        )
        self.keys.forget()  # its keys went with it: refused from this answer on
        self.snapshots.drop(principal.namespace)  # its feed went with it: none catches up
        return out
