"""Question-answering agent runs over LoCoMo conversations, in the generic steps format.

A small search agent answers LoCoMo questions with three tools implemented over the
conversation's text (no LLM, no tool errors):

* `search(query)`: the 3 best turns by IDF-weighted word overlap, each as its turn id, speaker
  and a window of words around the best match (what a search engine's snippet shows);
* `read(turn)`: the whole turn, with its session's date and the turns either side;
* `finish(answer)`: the final answer.

Each trial follows one policy, picked per (question, trial) by a seeded draw, and the policies
differ in what they look at before answering: one search then answer from the snippet;
several reworded searches then answer from the best snippet; one search then read the top hit;
several searches then read the turn most of them found. The answer is extracted from what
the agent saw (a "when" question answers with the session date when one was read, else the
rarest words not in the question), and the reward is the token F1 of that answer against the
gold answer (success at F1 >= 0.5). Whether a trial succeeds follows from what it retrieved
and read, not from its policy's name.

Records: `id` (question id and trial), `task_id` (the question id, e.g. "conv-26:q4"),
`outcome`, `reward`, `steps` (a user message with the question, then the calls), and `info`
(the policy, the gold answer and evidence: for benchmarks only; the memory never reads it).

LoCoMo is CC BY-NC 4.0: these runs are for evaluation and tests, never shipped in the product.

    python bench/qa_runs.py ../shared/data/locomo --questions 100 --trials 5 --out FILE
    python bench/qa_runs.py ../shared/data/locomo --questions 100 --trials 5 --mixed 6 \
        --others 2 --out tests/memory_core/retrospect/qa_runs.json   # the tests' fixture
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import string
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CATEGORIES = (1, 2, 3, 4)  # 5 (adversarial) has no answer in the conversation
F1_SUCCESS = 0.5
HITS = 3
SNIPPET_WORDS = 10
ANSWER_WORDS = 2
POLICIES = ("one_search", "many_searches", "search_read", "searches_read")
_STOPWORDS = """a an the and or but if of at by for with about against between into through
during before after above below to from up down in out on off over under again further then
once here there when where why how all any both each few more most other some such no nor not
only own same so than too very s t can will just don should now i me my myself we our ours you
your yours he him his she her hers it its they them their what which who whom this that these
those am is are was were be been being have has had having do does did doing would could ve ll
re d m o y yeah hey oh wow really also like much get got go going one"""
STOP = frozenset(_STOPWORDS.split())
NUMBERS = frozenset({"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"})
_WORD = re.compile(r"[a-z0-9]+")
_DATE = re.compile(r"on (\d{1,2}) ([A-Za-z]+),? (\d{4})")


def words(text: str) -> list[str]:
    """Lower-case words of a text."""
    return _WORD.findall(text.casefold())


def content(text: str) -> list[str]:
    """Words that are not stopwords."""
    return [w for w in words(text) if w not in STOP]


def normalise_answer(text: str) -> list[str]:
    """SQuAD-style answer tokens: lower case, no punctuation, no articles."""
    text = "".join(ch for ch in str(text).casefold() if ch not in string.punctuation)
    return [w for w in text.split() if w not in {"a", "an", "the"}]


def token_f1(answer: str, gold: str) -> float:
    """Token F1 of an answer against the gold answer."""
    a, g = normalise_answer(answer), normalise_answer(gold)
    common = sum((Counter(a) & Counter(g)).values())
    if not a or not g or not common:
        return 0.0
    p, r = common / len(a), common / len(g)
    return 2 * p * r / (p + r)


@dataclass
class Turn:
    """One turn of a conversation."""

    dia_id: str
    speaker: str
    text: str
    date: str  # the session's date, "8 May 2023" ('' when unknown)


class Conversation:
    """A conversation's turns, searchable."""

    def __init__(self, record: dict[str, Any]) -> None:
        conv = record["conversation"]
        self.turns: list[Turn] = []
        keys = sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
        )
        for key in keys:
            m = _DATE.search(str(conv.get(f"{key}_date_time", "")))
            date = f"{m.group(1)} {m.group(2)} {m.group(3)}" if m else ""
            for t in conv[key]:
                self.turns.append(Turn(t["dia_id"], t["speaker"], t.get("text", ""), date))
        self.by_id = {t.dia_id: i for i, t in enumerate(self.turns)}
        self.docs = [Counter(content(f"{t.speaker} {t.text}")) for t in self.turns]
        df = Counter(w for d in self.docs for w in d)
        n = len(self.docs)
        self.idf = {w: math.log(1 + n / c) for w, c in df.items()}

    def search(self, query: str) -> list[tuple[int, float]]:
        """The HITS best turns for a query: (turn index, score)."""
        q = set(content(query))
        scored = [
            (sum(self.idf.get(w, 0.0) for w in q & set(d)), i) for i, d in enumerate(self.docs)
        ]
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [(i, round(s, 3)) for s, i in scored[:HITS] if s > 0]

    def snippet(self, i: int, query: str) -> str:
        """A window of words around the turn's best match for the query."""
        toks = self.turns[i].text.split()
        q = set(content(query))

        def weight(j: int) -> float:
            return max((self.idf.get(w, 0.0) for w in content(toks[j]) if w in q), default=0.0)

        best = max(range(len(toks)), key=weight, default=0)
        lo = max(0, best - SNIPPET_WORDS // 2)
        return " ".join(toks[lo : lo + SNIPPET_WORDS])

    def read(self, i: int) -> str:
        """A turn in full, with its date and the turns either side."""
        t = self.turns[i]
        around = [self.turns[j] for j in (i - 1, i + 1) if 0 <= j < len(self.turns)]
        context = " | ".join(f"{a.speaker}: {a.text}" for a in around)
        return f"[{t.date}] {t.speaker}: {t.text}\n(around: {context})"


def extract(conv: Conversation, question: str, seen: str, date: str) -> str:
    """An answer from what the agent saw: the date for a 'when' question (if it read one),
    else the rarest words of what it saw that the question does not contain."""
    if words(question)[:1] == ["when"] and date:
        return date
    asked = set(content(question))
    cands = [w for w in content(seen) if w not in asked]
    if words(question)[:1] == ["when"]:
        years = [w for w in cands if re.fullmatch(r"(19|20)\d\d", w)]
        if years:
            return years[0]
    if words(question)[:2] in (["how", "many"], ["how", "long"]):
        toks = words(seen)
        for j, w in enumerate(toks):  # a count and its unit: "4 years", "two kids"
            if w.isdigit() or w in NUMBERS:
                return " ".join(toks[j : j + 2])
    ranked = sorted(dict.fromkeys(cands), key=lambda w: -conv.idf.get(w, 0.0))[:ANSWER_WORDS]
    return " ".join(w for w in dict.fromkeys(cands) if w in ranked)


def _queries(question: str, rng: random.Random, n: int) -> list[str]:
    """n queries for a question: its content words, then reworded (a word or two dropped)."""
    base = content(question)
    out = [" ".join(base)]
    while len(out) < n and len(base) > 1:
        keep = [w for w in base if rng.random() > 0.35] or [rng.choice(base)]
        out.append(" ".join(keep))
    return out


def run_policy(
    conv: Conversation, question: str, policy: str, rng: random.Random
) -> list[dict[str, Any]]:
    """The tool calls of one trial."""
    steps: list[dict[str, Any]] = [{"type": "message", "role": "user", "text": question}]

    def call(tool: str, args: dict[str, Any], observation: str) -> None:
        steps.append({"type": "tool_call", "tool": tool, "args": args, "observation": observation})

    many = policy in ("many_searches", "searches_read")
    first = _queries(question, rng, 1)[0]
    if rng.random() < 0.4:  # the agent's own wording: sometimes a word fewer
        first = " ".join(_queries(question, rng, 2)[-1:])
    queries = [first, *_queries(question, rng, 3)[1:]] if many else [first]
    votes: dict[int, float] = {}
    snippets: dict[int, str] = {}
    for q in queries:
        hits = conv.search(q)
        for rank, (i, score) in enumerate(hits):
            votes[i] = votes.get(i, 0.0) + score / (rank + 1)
            snippets.setdefault(i, conv.snippet(i, q))
        listing = "\n".join(
            f"{conv.turns[i].dia_id} ({conv.turns[i].speaker}): ...{snippets[i]}..."
            for i, _ in hits
        )
        call("search", {"query": q}, listing or "no results")
    best = max(votes, key=lambda i: (votes[i], -i)) if votes else None
    seen, date = "", ""
    if best is not None and policy in ("search_read", "searches_read"):
        text = conv.read(best)
        call("read", {"turn": conv.turns[best].dia_id}, text)
        seen, date = conv.turns[best].text, conv.turns[best].date
    elif best is not None:
        seen = snippets[best]
    answer = extract(conv, question, seen, date) if seen else "unknown"
    call("finish", {"answer": answer}, "answer submitted")
    return steps


def questions(
    records: Sequence[dict[str, Any]], n: int
) -> list[tuple[str, Conversation, dict[str, Any]]]:
    """n answerable questions spread over the conversations: (question id, conversation, qa)."""
    pool: list[tuple[str, Conversation, dict[str, Any]]] = []
    for r in records:
        conv = Conversation(r)
        for j, qa in enumerate(r["qa"]):
            if qa.get("category") in CATEGORIES and "answer" in qa:
                pool.append((f"{r['sample_id']}:q{j}", conv, qa))
    step = max(1, len(pool) // max(n, 1))
    return pool[::step][:n]


def generate(
    records: Sequence[dict[str, Any]], *, n_questions: int, trials: int, seed: int = 7
) -> list[dict[str, Any]]:
    """The runs: trials per question, each with its own seeded policy and wording."""
    out: list[dict[str, Any]] = []
    stamp = datetime(2026, 1, 1).timestamp()
    for qid, conv, qa in questions(records, n_questions):
        for t in range(trials):
            rng = random.Random(f"{seed}:{qid}:{t}")
            policy = rng.choice(POLICIES)
            steps = run_policy(conv, qa["question"], policy, rng)
            for k, s in enumerate(steps):
                s["ts"] = stamp + len(out) * 60 + k
            answer = steps[-1]["args"]["answer"]
            f1 = token_f1(answer, str(qa["answer"]))
            out.append(
                {
                    "id": f"{qid}#t{t}",
                    "task_id": qid,
                    "outcome": "success" if f1 >= F1_SUCCESS else "failure",
                    "reward": round(f1, 3),
                    "steps": steps,
                    "info": {
                        "policy": policy,
                        "gold": str(qa["answer"]),
                        "evidence": qa.get("evidence", []),
                        "category": qa.get("category"),
                    },
                }
            )
    return out


def pick(runs: Sequence[dict[str, Any]], *, mixed: int, others: int) -> list[dict[str, Any]]:
    """A small set: the first `mixed` tasks with a success and a failure, the first `others`
    tasks without (a test fixture)."""
    outcomes: dict[str, set[str]] = {}
    for r in runs:
        outcomes.setdefault(r["task_id"], set()).add(r["outcome"])
    both = [t for t, o in outcomes.items() if len(o) == 2][:mixed]
    rest = [t for t, o in outcomes.items() if len(o) == 1][:others]
    keep = set(both) | set(rest)
    return [r for r in runs if r["task_id"] in keep]


def load(path: Path) -> list[dict[str, Any]]:
    """LoCoMo records from a file or a directory of files."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out: list[dict[str, Any]] = []
    for f in files:
        data = json.loads(f.read_text())
        out.extend(data if isinstance(data, list) else [data])
    return out


def summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Success rates by policy, and how many tasks have both a success and a failure."""
    by_policy: dict[str, list[int]] = {}
    tasks: dict[str, set[str]] = {}
    for r in runs:
        by_policy.setdefault(r["info"]["policy"], []).append(r["outcome"] == "success")
        tasks.setdefault(r["task_id"], set()).add(r["outcome"])
    return {
        "runs": len(runs),
        "tasks": len(tasks),
        "success_rate": round(sum(r["outcome"] == "success" for r in runs) / max(len(runs), 1), 3),
        "by_policy": {
            p: {"runs": len(v), "success_rate": round(sum(v) / len(v), 3)}
            for p, v in sorted(by_policy.items())
        },
        "mixed_tasks": sum(len(o) == 2 for o in tasks.values()),
    }


def main(argv: list[str] | None = None) -> int:
    """Generate the runs, print their summary, write them to --out."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("locomo", type=Path)
    p.add_argument("--questions", type=int, default=100)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mixed", type=int, default=None, help="keep only this many mixed tasks")
    p.add_argument("--others", type=int, default=0, help="and this many tasks without a mix")
    a = p.parse_args(argv)
    runs = generate(load(a.locomo), n_questions=a.questions, trials=a.trials, seed=a.seed)
    if a.mixed is not None:
        runs = pick(runs, mixed=a.mixed, others=a.others)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(runs, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(summary(runs), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
