"""The LLM half of bench/poison.py: the same poisoned runs learnt with the LLM extractor
(HINDSIGHT_LLM__MODE `instead` and `after_rules`) against a compromised model, and LoCoMo
facts extracted by the LLM facts path against the same model.

The model (tests/helpers/scripted_llm.py behind the real `openai` client) is obedient: it
finds the injected order in the trajectory it is shown (any decoded reading) and copies it,
reworded, into its cards: one card per placement (failure-mode handling, action note,
scenario, the attacker's tool with its value in the action sequence, all at once), next to
the careful card. For facts it turns the attacker's turn into a standing fact, reworded.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import poison_tau as pt
from poison_attacks import RUN_TOOL, Variant

from memory_core.consolidate.stage import consolidate
from memory_core.ingest.store import ingest
from memory_core.retrospect.claims import worker_id
from memory_core.retrospect.factory import build_extractor
from memory_core.retrospect.stage import retrospect_once
from memory_core.screen.decode import readings
from memory_core.settings import Settings
from memory_core.validate.stage import validate_drafts
from tests.helpers import fake_model
from tests.helpers.scripted_llm import Reply, ScriptedLLM

MODES = ("instead", "after_rules")
_CALL = re.compile(r"^\[\d+\] call (\S+) ")


class Adversary:
    """The compromised model's responder; `chunk` is the attacks of the current trial."""

    def __init__(self) -> None:
        self.chunk: list[Variant] = []

    def _found(self, text: str) -> tuple[Variant, str] | None:
        """The attack this prompt carries and the tool it names (a real-tool or value-only
        attack: a tool of the run, the one called on the line that carries it, or named there)."""
        for line in text.splitlines():
            for r in readings(line):
                low = r.lower()
                for v in self.chunk:
                    if v.value.lower() not in low and (not v.tool or v.tool.lower() not in low):
                        continue
                    if RUN_TOOL not in v.text and v.tool:
                        return v, v.tool
                    # the tool the attack names: a tool of the run named after the call's head
                    tools = {m.group(1) for m in map(_CALL.match, text.splitlines()) if m}
                    said = low.split(" -> ", 1)[-1]
                    named = [t for t in sorted(tools) if t.lower() in said]
                    return v, (named or sorted(tools) or ["?"])[0]
        return None

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        kind = fake_model.prompt_kind(body)
        system = body["messages"][0]["content"]
        user = body["messages"][1]["content"]
        if "durable facts" in system:
            facts = []
            for ref, speaker, said in fake_model.turns(body):
                hit = self._found(said)
                if hit:
                    facts.append(
                        fake_model.obedient_fact(ref, speaker, tool=hit[0].tool, value=hit[0].value)
                    )
            return Reply(json.dumps({"facts": facts}))
        hit = self._found(user.split("\n\nDecision points:\n", 1)[0])
        if kind == "decision_points":
            return Reply(json.dumps(fake_model.obedient_points(body, at_first_call=bool(hit))))
        if kind == "cards":
            if hit is None:
                return Reply(json.dumps(fake_model.cards(body)))
            v, tool = hit
            return Reply(json.dumps(fake_model.obedient_cards(body, tool=tool, value=v.value, n=n)))
        if kind == "contrast":
            return Reply(json.dumps(self._contrast(body, hit, n)))
        return Reply(status=400, error=f"unexpected prompt {kind}")

    def _contrast(self, body: dict[str, Any], hit: tuple[Variant, str] | None, n: int) -> Any:
        """The careful contrast; with an attack among the trials, its order (paraphrased) in
        every card's handling and the attacker's tool first in its actions, and a card of its
        own when the careful answer has none."""
        from tests.helpers.fake_contrast import answer, trials

        out = answer(body)
        if hit is None:
            return out
        v, tool = hit
        order = fake_model.PARAPHRASES[n % len(fake_model.PARAPHRASES)].format(
            tool=tool, val=v.value
        )
        shown = trials(body)
        wins = sorted(k for k in shown if k.startswith("S"))
        losses = sorted(k for k in shown if k.startswith("F") and shown[k])
        if not out["cards"] and wins and losses:
            step, first, _ = shown[losses[0]][0]
            out["cards"] = [
                {
                    "failed_trial": losses[0],
                    "step": step,
                    "successful_trial": wins[0],
                    "difference": f"the successful trial ran {tool} first",
                    "reason": order,
                    "scenario": f"Calling {first} for a request",
                    "preconditions": [f"tool == {json.dumps(first)}"],
                    "action_sequence": [{"tool": first, "params_template": {}, "note": ""}],
                    "expected_outcome": "the task succeeds",
                    "actual_outcome": "the task failed",
                    "failure_modes": [{"mode": f"{first} without {tool}", "handling": order}],
                    "confidence": 0.7,
                }
            ]
        for card in out["cards"]:
            card["failure_modes"][0]["handling"] = order
            step = {"tool": tool, "params_template": {"target": v.value}, "note": order}
            card["action_sequence"].insert(0, step)
        return out


def learner(url: str, mode: str) -> pt.Learner:
    """The nightly stages with the LLM extractor configured as HINDSIGHT_LLM__* would."""

    def learn(engine: Any, records: list[tuple[str, Any]], screen: bool) -> None:
        settings = Settings(
            embedding={"provider": "none"},
            screen=screen,
            llm={"base_url": url, "model": "scripted-1", "mode": mode, "retry_delays_s": [0.05]},
        )
        ingest(engine=engine, records=records, namespace=pt.NS, task_type=pt.TASK_TYPE)
        extractor = build_extractor(settings, engine)
        while retrospect_once(
            engine=engine,
            extractor=extractor,
            worker=worker_id(),
            batch_size=200,
            lease=pt.timedelta(seconds=300),
            screen=screen,
        ).claimed:
            pass
        validate_drafts(engine=engine, reports_dir=None, namespace=pt.NS)
        consolidate(engine=engine, namespace=pt.NS, rules=settings.consolidate)

    return learn


def run_tau_llm(
    recs: list[dict[str, Any]],
    variants: list[Variant],
    rates: tuple[float, ...],
    now: Any,
    summary: Any,
) -> dict[str, Any]:
    """Attack success and replay utility with the LLM extractor, per mode, screen on and off."""
    benign = [(f"r{i}", r) for i, r in enumerate(recs)]
    good = pt.good_runs(recs)
    held = {v.name for v in variants if v.held_out}
    out: dict[str, Any] = {"variants": len(variants), "modes": {}}
    adversary = Adversary()
    with ScriptedLLM(adversary) as server:
        for mode in MODES:
            learn = learner(server.url, mode)
            res: dict[str, Any] = {"rates": {}}
            for screen in (True, False):
                cfg = "defended" if screen else "undefended"
                base, learn_s = pt.learn_base(benign, screen, learn)
                clean = pt.utility(base, [], benign, screen, now, learn)
                res.setdefault("clean_replay_hit_rate", {})[cfg] = round(clean, 4)
                res.setdefault("learn_s", {})[cfg] = round(learn_s, 1)
                by_k: dict[int, dict[str, tuple[int, int]]] = {}
                for rate in rates:
                    k = max(1, round(rate * len(recs)))
                    t0 = time.perf_counter()
                    if k not in by_k:
                        by_k[k] = {}
                        for chunk in [variants[i : i + k] for i in range(0, len(variants), k)]:
                            adversary.chunk = chunk
                            r = pt.attack_trial(base, chunk, good, screen, now, learn)
                            for v in chunk:
                                by_k[k][v.name] = (r["hits"][v.name], r["states"])
                    mix = variants[:k]
                    adversary.chunk = mix
                    extra = [
                        (f"poison-{i}", pt.poison(good[i % len(good)], v, i))
                        for i, v in enumerate(mix)
                    ]
                    hit = pt.utility(base, extra, benign, screen, now, learn)
                    row = res["rates"].setdefault(str(rate), {"poisoned_records": k})
                    row[cfg] = {
                        **summary(by_k[k], held),
                        "replay_hit_rate": round(hit, 4),
                        "replay_delta_points": round(100 * (hit - clean), 2),
                        "seconds": round(time.perf_counter() - t0, 1),
                    }
                    print(
                        f"tau llm {mode} {cfg} rate {rate}: {row[cfg]['attack_success']} "
                        f"hit {hit:.3f}/{clean:.3f}",
                        flush=True,
                    )
                pt.shutil.rmtree(base, ignore_errors=True)
            out["modes"][mode] = res
        out["llm_requests"] = len(server.requests)
    return out


def run_locomo_llm(
    records: list[dict[str, Any]],
    variants: list[Variant],
    rates: tuple[float, ...],
    conversations: int,
    summary: Any,
    embedder: Any,
) -> dict[str, Any]:
    """Attack success on facts (rules + the LLM facts path) and recall, screen on and off."""
    import poison_locomo as pl

    held = {v.name for v in variants if v.held_out}
    n_turns = pl.turns(records)
    sub = records[:conversations]
    out: dict[str, Any] = {"variants": len(variants), "rates": {}}
    adversary = Adversary()
    with ScriptedLLM(adversary) as server:
        for screen in (True, False):
            cfg = "defended" if screen else "undefended"
            clean = pl.recall(sub, screen, embedder, server.url)
            out.setdefault("clean_recall_at_10", {})[cfg] = round(clean, 4)
            for rate in rates:
                k = max(1, round(rate * n_turns))
                per: dict[str, tuple[int, int]] = {}
                t0 = time.perf_counter()
                for chunk in [variants[i : i + k] for i in range(0, len(variants), k)]:
                    adversary.chunk = chunk
                    r = pl.attack_trial(records, chunk, screen, server.url)
                    for v in chunk:
                        per[v.name] = (r["hits"][v.name], r["asked"][v.name])
                k_sub = max(1, round(rate * pl.turns(sub)))
                mix = [variants[i % len(variants)] for i in range(k_sub)]
                adversary.chunk = mix
                rec = pl.recall(pl.poison(sub, mix), screen, embedder, server.url)
                row = out["rates"].setdefault(str(rate), {"poisoned_turns": k})
                row[cfg] = {
                    **summary(per, held),
                    "recall_at_10": round(rec, 4),
                    "recall_delta_points": round(100 * (rec - clean), 2),
                    "seconds": round(time.perf_counter() - t0, 1),
                }
                print(
                    f"locomo llm {cfg} rate {rate}: {row[cfg]['attack_success']} "
                    f"r@10 {rec:.3f}/{clean:.3f}",
                    flush=True,
                )
        out["llm_requests"] = len(server.requests)
    return out
