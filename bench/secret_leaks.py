"""Secrets planted in tau-bench runs and LoCoMo conversations: does any reach a reader?

Every variant (a kind of secret x a phrasing; tokens freshly random per run, in the
providers' documented shapes) is planted once into a copy of a tau-bench run (rotating
between a user message, a tool result, a tool error and a call's arguments) and once into a
copy of a LoCoMo conversation's first session (as a turn of its speaker). The phrasings
marked held_out were written after the redaction rules were tuned and never used to tune
them. The product's stages run with default settings (ingest -> rule retrospect -> validate ->
facts -> consolidate), and the tau runs again through the LLM extractor against the scripted
OpenAI-compatible server, whose model copies the prompt it was sent into its cards (a model
that repeats what it reads: whatever reaches a prompt reaches a card). Then, with a key of
read and write scope, every surface is read and a secret counts as visible on a surface when
its value (or its HTML or JSON escaping) appears there:

* api: a real HTTP server: every card of every status (list, get, history), queries with a
  prompt block for each planted run's task state, fact searches;
* rejected_cards: the rejected cards of the above (list, get, history);
* mcp: the MCP tools' answers (query_memory_cards, memory_search, list_recent_cards);
* console: the console's pages signed in with the key: card lists per status, every card,
  every planted run's trajectory page at every step window, facts, overview, dead letters;
* logs: every log record of the whole run (ingest, stages, server);
* llm_prompts: every request the scripted LLM server received;
* prefect: the same planted runs (and each phrasing once more as a run's own id) through the
  real nightly flow on an in-process Prefect API, one night with the LLM stage answering and
  one with it down (500s): every artifact, log, state message, task run name and persisted
  result of the flow run and its task runs, and the CLI's dead-letter listings
  (bench/secret_prefect.py; the clean runs' night counts the markers in its artifacts).

The same pipeline on the clean data counts redaction markers in what is served
(false-positive redactions), and every string of the clean data is scanned too.

    python bench/secret_leaks.py [--backend sqlite|postgresql]

Writes bench/results/secrets.json.
"""

# ruff: noqa: E402
from __future__ import annotations

import sys
from pathlib import Path

# this file's name shadows the standard library's `secrets` (numpy imports it): run it as a
# script without its own folder on the path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import asyncio
import copy
import html
import json
import logging
import random
import re
import string
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"

rng = random.Random(15)
A62 = string.ascii_letters + string.digits
LOWER = string.ascii_lowercase


def _r(n: int, alphabet: str = A62) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _pw() -> str:
    return (
        _r(3, string.ascii_uppercase) + _r(4, string.ascii_lowercase) + _r(3, string.digits) + "!"
    )


# class -> a fresh secret value
SECRETS: dict[str, Callable[[], str]] = {
    "openai": lambda: "sk-" + _r(48),
    "openai_project": lambda: "sk-proj-" + _r(56),
    "anthropic": lambda: "sk-ant-api03-" + _r(80),
    "aws_access_key_id": lambda: "AKIA" + _r(16, string.ascii_uppercase + string.digits),
    "aws_secret": lambda: _r(40, A62 + "/+"),
    "github_pat": lambda: "ghp_" + _r(36),
    "github_oauth": lambda: "gho_" + _r(36),
    "github_fine": lambda: "github_pat_" + _r(22) + "_" + _r(59),
    "slack": lambda: "xoxb-" + _r(11, string.digits) + "-" + _r(24),
    "stripe_live": lambda: "sk_live_" + _r(24),
    "stripe_restricted": lambda: "rk_live_" + _r(24),
    "google": lambda: "AIza" + _r(35, A62 + "-_"),
    "jwt": lambda: "eyJhbGciOiJIUzI1NiJ9." + "eyJ" + _r(40, A62 + "-_") + "." + _r(43, A62 + "-_"),
    "password": _pw,
    "pin": lambda: _r(4, string.digits),
    "entropy_token": lambda: _r(32),
    # credentials by where they sit, provider formats, prose in other languages
    "hex32": lambda: _r(32, "0123456789abcdef"),
    "discord": lambda: "M" + _r(25) + "." + _r(6) + "." + _r(38, A62 + "_-"),
    "shopify": lambda: "shpat_" + _r(32, "0123456789abcdef"),
    "twilio_sid": lambda: "AC" + _r(32, "0123456789abcdef"),
    "telegram": lambda: _r(9, string.digits) + ":AA" + _r(33, A62 + "_-"),
    "databricks": lambda: "dapi" + _r(32, "0123456789abcdef"),
    "vault": lambda: "hvs." + _r(90, A62 + "_-"),
    "doppler": lambda: "dp.pt." + _r(43),
    "gitlab": lambda: "glpat-" + _r(20, A62 + "_-"),
    "sendgrid": lambda: "SG." + _r(22, A62 + "_-") + "." + _r(43, A62 + "_-"),
    "huggingface": lambda: "hf_" + _r(34),
    "npm": lambda: "npm_" + _r(36),
    "mailgun": lambda: "key-" + _r(32, "0123456789abcdef"),
    "grafana": lambda: "glsa_" + _r(32) + "_" + _r(8, "0123456789abcdef"),
    "pypi": lambda: "pypi-AgEIcHlwaS5vcmc" + _r(70, A62 + "_-"),
    "word_pw": lambda: (
        _r(5, string.ascii_lowercase) + _r(2, string.digits) + _r(4, string.ascii_lowercase)
    ),
    "cjk_pw": lambda: _r(4, string.ascii_lowercase) + _r(4, string.digits),
    "cookie_value": lambda: _r(26, "0123456789abcdefghijklmnopqrstuv"),
}
# (name, class, phrasing, held_out): {s} is the secret
VARIANTS: list[tuple[str, str, str, bool]] = [
    ("openai_env", "openai", "export OPENAI_API_KEY={s}", False),
    ("openai_prose", "openai", "here is my key {s} for the integration", False),
    ("openai_proj", "openai_project", "use key {s} for the batch job", False),
    ("openai_proj_json", "openai_project", '{{"api_key": "{s}"}}', True),
    ("anthropic", "anthropic", "ANTHROPIC_API_KEY={s}", False),
    ("anthropic_prose", "anthropic", "the claude key is {s}", True),
    ("aws_id", "aws_access_key_id", "aws access key id {s}", False),
    ("aws_pair", "aws_secret", "aws_secret_access_key = {s}", False),
    ("aws_secret_prose", "aws_secret", "AWS secret key: {s}", True),
    ("gh_pat", "github_pat", "git clone https://{s}@github.com/acme/app.git", False),
    ("gh_oauth", "github_oauth", "token {s} expired, refreshed", True),
    ("gh_fine", "github_fine", "GITHUB_TOKEN={s}", False),
    ("slack", "slack", "posting with {s} to #ops", False),
    ("slack_header", "slack", "Authorization: Bearer {s}", True),
    ("stripe", "stripe_live", "charge failed with key {s}", False),
    ("stripe_rk", "stripe_restricted", "restricted key {s} lacks scope", True),
    ("google", "google", "maps call https://maps.googleapis.com/api?key={s}", False),
    ("google_prose", "google", "the google api key is {s}", True),
    ("jwt_bearer", "jwt", "Authorization: Bearer {s}", False),
    ("jwt_cookie", "jwt", "session cookie was {s}", True),
    (
        "pem",
        "password",
        "-----BEGIN PRIVATE KEY-----\nMIIE{s}Qa8xZ\n-----END PRIVATE KEY-----",
        False,
    ),
    (
        "pem_rsa",
        "entropy_token",
        "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----",
        True,
    ),
    ("pw_favourite", "password", "my favourite password is {s}", False),
    ("pw_plain", "password", "my password is {s}", False),
    ("pw_for", "password", "the password for the airline portal is {s}", False),
    ("pw_assign", "password", "password: {s}", False),
    ("pw_pwd", "password", "pwd is {s}", False),
    ("pw_passcode", "password", "the passcode is {s}", False),
    ("pw_use", "password", "use the password {s} to log in", False),
    ("pw_changed", "password", "I changed my password to {s} yesterday", True),
    ("pw_wifi", "password", "wifi password for the lake house is {s}", True),
    ("pw_login", "password", "my login password was {s} but I reset it", True),
    ("pw_secret", "password", "the secret is {s}", True),
    ("pw_entered", "password", "I entered the passphrase {s} twice", True),
    ("pin_card", "pin", "the pin for my card is {s}", False),
    ("pin_plain", "pin", "my pin is {s}", True),
    ("pin_code", "pin", "pin code: {s}", True),
    ("conn_pg", "password", "postgres://app:{s}@db.internal:5432/prod", False),
    ("conn_mongo", "password", "mongodb+srv://admin:{s}@cluster0.example.net/db", True),
    ("conn_redis", "password", "redis://default:{s}@cache:6379/0", True),
    ("conn_amqp", "password", "broker at amqp://guest:{s}@mq.local:5672//", True),
    ("entropy_bare", "entropy_token", "the reset link token {s} works once", False),
    ("entropy_header", "entropy_token", "X-Api-Key: {s}", True),
    ("entropy_json", "entropy_token", '{{"credentials": "{s}"}}', True),
    (
        "bearer_plain",
        "entropy_token",
        "curl -H 'Authorization: Bearer {s}' https://api.acme.io",
        False,
    ),
    ("basic_auth", "entropy_token", "Authorization: Basic {s}==", True),
    # URL user-info without a user, CLI password flags
    ("url_nouser", "password", "broker is rediss://:{s}@queue.internal:6380/2", True),
    ("url_token", "github_pat", "pip install git+https://{s}@git.corp/tools.git", True),
    ("mysql_p", "password", "ran mysqldump -h 10.1.2.3 -u backup -p{s} orders > o.sql", True),
    ("sshpass", "password", "sshpass -p '{s}' scp report.csv ops@bastion:/tmp", True),
    ("redis_cli", "password", "redis-cli -h cache -p 6379 -a {s} FLUSHALL", True),
    ("docker_login", "password", "docker login registry.corp -u ci -p {s}", True),
    ("long_flag", "password", "./migrate --db-host db --admin-password {s} --yes", True),
    ("curl_user", "password", "curl --user svc:{s} https://hooks.corp/notify", True),
    # cookies and auth headers
    ("cookie", "cookie_value", "request carried Cookie: theme=dark; sessionid={s}", True),
    ("set_cookie", "cookie_value", "server replied Set-Cookie: auth_sid={s}; Secure", True),
    ("x_auth_token", "entropy_token", "retry with header X-Auth-Token: {s}", True),
    ("private_token", "gitlab", "PRIVATE-TOKEN: {s}", True),
    ("auth_token_scheme", "hex32", "Authorization: Token {s}", True),
    ("env_pw", "password", "set SMTP_PASSWORD={s} in the env file", True),
    # provider token formats
    ("twilio_auth", "hex32", "twilio auth token {s} rotated this morning", True),
    ("twilio_sid_prose", "twilio_sid", "account {s} is the sender", True),
    ("discord", "discord", "the bot logs in with {s}", True),
    ("shopify", "shopify", "shop admin api call with {s} got 401", True),
    ("telegram", "telegram", "notify via bot {s}", True),
    ("databricks", "databricks", "workspace token {s}", True),
    ("vault", "vault", "vault answered with client token {s}", True),
    ("doppler", "doppler", "doppler service token {s}", True),
    ("sendgrid", "sendgrid", "mail sent using {s}", True),
    ("huggingface", "huggingface", "download with {s}", True),
    ("npm", "npm", "//registry.npmjs.org/:_authToken={s}", True),
    ("mailgun", "mailgun", "mailgun key {s}", True),
    ("grafana", "grafana", "dashboard provisioning uses {s}", True),
    ("pypi", "pypi", "twine upload -u __token__ -p {s} dist/*", True),
    # a password stated in prose in other languages
    ("de_pw", "word_pw", "Mein neues Kennwort lautet {s}, bitte merken", True),
    ("es_pw", "word_pw", "La contraseña del portal es {s}", True),
    ("fr_pw", "word_pw", "Voici mon mot de passe : {s}", True),
    ("pt_pw", "word_pw", "Minha senha é {s}", True),
    ("it_pw", "word_pw", "la password del conto è {s}", True),
    ("nl_pw", "word_pw", "Mijn wachtwoord is {s}", True),
    ("pl_pw", "word_pw", "Moje hasło do banku to {s}", True),
    ("tr_pw", "word_pw", "Şifrem şu: {s}", True),
    ("ru_pw", "word_pw", "Пароль от почты: {s}", True),
    ("sv_pw", "word_pw", "Lösenordet är {s}", True),
    ("zh_pw", "cjk_pw", "我的登录密码是{s}，请保密", True),
    ("ja_pw", "cjk_pw", "パスワードは{s}です", True),
    ("ko_pw", "cjk_pw", "비밀번호는 {s} 입니다", True),
    ("de_pin", "pin", "Die Geheimzahl meiner Karte ist {s}", True),
]
PLACES = ("user", "tool_result", "tool_error", "tool_args")


def _plant_tau(run: dict[str, Any], text: str, place: str, rid: str) -> dict[str, Any]:
    run = copy.deepcopy(run)
    run.pop("id", None)
    run["id"] = rid
    msgs = run["traj"] if "traj" in run else run["messages"]
    tools = [i for i, m in enumerate(msgs) if m.get("role") == "tool"]
    users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
    calls = [i for i, m in enumerate(msgs) if m.get("tool_calls")]
    if place == "user" or not tools:
        i = users[min(1, len(users) - 1)]
        msgs[i]["content"] = f"{msgs[i]['content']} By the way, {text}"
    elif place == "tool_result":
        msgs[tools[0]]["content"] = f"{msgs[tools[0]]['content']}\n{text}"
    elif place == "tool_error":
        msgs[tools[-1]]["content"] = f"Error: request refused ({text})"
    else:
        fn = msgs[calls[0]]["tool_calls"][0]["function"]
        args = json.loads(fn["arguments"] or "{}")
        args["note"] = text
        fn["arguments"] = json.dumps(args)
    return run


def _plant_locomo(sample: dict[str, Any], text: str | None, rid: str) -> dict[str, Any]:
    conv = sample["conversation"]
    turns = [dict(t) for t in conv["session_1"][:12]]
    if text is not None:  # None: the same cut of the conversation, nothing planted
        turns.insert(3, {"speaker": turns[2]["speaker"], "dia_id": "D1:secret", "text": text})
    return {
        "sample_id": rid,
        "conversation": {
            "speaker_a": conv["speaker_a"],
            "speaker_b": conv["speaker_b"],
            "session_1_date_time": conv["session_1_date_time"],
            "session_1": turns,
        },
    }


def _pipeline(
    engine: Any, settings: Any, namespace: str, records: list[tuple[str, Any]]
) -> dict[str, Any]:
    from memory_core.consolidate.stage import consolidate
    from memory_core.facts.stage import extract_facts
    from memory_core.ingest.store import ingest
    from memory_core.validate.stage import validate_drafts
    from tests.helpers.pipeline import retrospect_all

    t0 = time.perf_counter()
    rep = ingest(engine=engine, records=records, namespace=namespace, task_type="default")
    retro = retrospect_all(engine)
    validate_drafts(engine=engine, reports_dir=None, review_below=settings.review.below)
    facts = extract_facts(engine=engine, namespace=namespace)
    consolidate(engine=engine, namespace=namespace, rules=settings.consolidate)
    return {
        "stored": rep.stored,
        "refused": len(rep.refused),
        "cards_created": retro.cards_created,
        "facts_new": facts.new,
        "facts_refused": facts.refused,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _served(
    svc: Any, namespace: str, states: list[dict[str, Any]], queries: list[str]
) -> list[str]:
    """Everything an agent holding a key of the namespace can be served, as JSON texts."""
    from mcp import Client

    from memory_api.mcp_server import create_mcp
    from memory_core.serve.keys import create_key
    from memory_core.serve.schemas import QueryRequest

    _, key = create_key(engine=svc.engine, namespace=namespace, scopes=["read", "write", "admin"])
    who = svc.authenticate(key)
    out: list[str] = []
    statuses = ["active", "review", "draft", "quarantined", "rejected", "superseded", "archived"]
    offset = 0
    while True:
        page = svc.list_cards(principal=who, statuses=statuses, kind=None, text=None,
                              min_confidence=None, limit=200, offset=offset)  # fmt: skip
        for c in page:
            out.append(svc.get_card(principal=who, card_id=c.card_id).model_dump_json())
            hist = svc.history(principal=who, card_id=c.card_id)
            out.append(json.dumps([h.model_dump(mode="json") for h in hist]))
        if len(page) < 200:
            break
        offset += 200
    for state in states:
        req = QueryRequest(task_state=state, top_k=10, prompt_tokens=800)
        out.append(svc.query(principal=who, request=req).model_dump_json())
    for q in queries:
        hits = svc.search_facts(principal=who, text=q, top_k=10, include_superseded=True)
        out.append(json.dumps([h.model_dump(mode="json") for h in hits]))

    async def mcp() -> None:
        async with Client(create_mcp(svc, principal=who)) as client:
            for state in states[:20]:
                r = await client.call_tool(
                    "query_memory_cards", {"task_state": state, "prompt_tokens": 800}
                )
                out.append(str(r.structured_content or r.content))
            for q in queries[:20]:
                r = await client.call_tool("memory_search", {"text": q})
                out.append(str(r.structured_content or r.content))
            r = await client.call_tool("list_recent_cards", {"limit": 50})
            out.append(str(r.structured_content or r.content))

    asyncio.run(mcp())
    return out


def _states(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from memory_core.ingest.formats import parse_record

    states = []
    for i, run in enumerate(runs):
        t = parse_record(run, name=f"r{i}", namespace="x", task_type="default")
        tools = [s.tool for s in t.steps if s.tool]
        errors = [s.error for s in t.steps if s.error]
        states.append({"task_type": t.task_type, "tools_used": tools})
        for tool in dict.fromkeys(tools):
            states.append({"task_type": t.task_type, "tool": tool, "tools_used": tools,
                           "last_error": errors[-1] if errors else ""})  # fmt: skip
    return states[:120]


SHORT = 8  # a secret this short (a 4-digit PIN) turns up in 8 MB of answers by chance
_PIN_CUE = re.compile(r"(?i)pin|geheimzahl|code")


def _visible(secret: str, blob: str) -> bool:
    """The secret as written, HTML-escaped (a page) or JSON-escaped (an answer), in the blob;
    a short one only as a token of its own with its cue word shortly before it."""
    forms = {secret, html.escape(secret), json.dumps(secret)[1:-1]}
    if len(secret) >= SHORT:
        return any(f in blob for f in forms)
    for m in re.finditer(r"(?<![0-9A-Za-z])" + re.escape(secret) + r"(?![0-9A-Za-z])", blob):
        if _PIN_CUE.search(blob, max(0, m.start() - 60), m.start()):
            return True
    return False


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument(
        "--no-redact",
        action="store_true",
        help="baseline: redaction off (shows what the benchmark catches when nothing redacts)",
    )
    args = ap.parse_args()
    if args.no_redact:
        import memory_core.redact as redaction

        redaction.find_secrets = lambda text: []  # every caller goes through this one

    import psycopg
    from sqlalchemy import select
    from sqlmodel import col

    from bench.secret_surfaces import echo_model
    from memory_core import db
    from memory_core.redact import MARKER, has_secret
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings
    from tests.helpers.data import shared_data_dir

    data = shared_data_dir()
    tau = json.loads((data / "tau-bench-airline" / "trajectories.json").read_text())
    locomo = json.loads((data / "locomo" / "locomo-dev.json").read_text())

    # false positives on every string of the clean data
    fp: dict[str, Any] = {}
    for name, doc in (("tau_bench", tau), ("locomo", locomo)):
        ss = _strings(doc)
        flagged = sum(has_secret(s) for s in ss)
        fp[name] = {"strings": len(ss), "flagged": flagged, "rate": flagged / len(ss)}

    planted: list[dict[str, Any]] = []
    tau_records: list[tuple[str, Any]] = []
    loc_records: list[tuple[str, Any]] = []
    for i, (vname, cls, phrasing, held) in enumerate(VARIANTS):
        secret = SECRETS[cls]()
        text = phrasing.format(s=secret)
        place = PLACES[i % len(PLACES)]
        tau_records.append(
            (f"tau-{vname}", _plant_tau(tau[i % len(tau)], text, place, f"secret-tau-{i}"))
        )
        loc_records.append(
            (f"locomo-{vname}", _plant_locomo(locomo[i % len(locomo)], text, f"secret-loc-{i}"))
        )
        planted.append({"variant": vname, "class": cls, "held_out": held, "place": place,
                        "secret": secret, "text": text})  # fmt: skip

    llm_records = [(f"llm-{n}", {**r, "id": "llm-" + r["id"]}) for n, r in tau_records]

    from bench.secret_prefect import PARTS, prefect_nights, prefect_report
    from bench.secret_surfaces import LogCapture, learn_with_llm, read_surfaces
    from memory_core.models.trajectory import Trajectory
    from memory_core.serve.keys import create_key
    from tests.helpers.scripted_llm import ScriptedLLM

    logs = LogCapture()
    logging.getLogger().addHandler(logs)
    logging.getLogger().setLevel(logging.INFO)
    for name in ("memory_core", "memory_api", "memory_cli", "tasks", "flows", "hindsight"):
        logging.getLogger(name).setLevel(logging.DEBUG)

    tmp = Path(tempfile.mkdtemp())
    dbs: list[str] = []  # the Prefect nights' databases, dropped at the end
    dbname = None
    if args.backend == "postgresql":
        dbname = f"bench_secrets_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        settings = Settings(data_dir=tmp, database_url=PG_ADMIN.rsplit("/", 1)[0] + f"/{dbname}")
    else:
        settings = Settings(data_dir=tmp)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    surfaces: dict[str, list[str]] = {}
    try:
        with ScriptedLLM(echo_model) as llm:
            runs = {
                "planted": _pipeline(engine, settings, "planted", tau_records + loc_records),
                "planted_llm": learn_with_llm(
                    engine=engine, url=llm.url, namespace="planted_llm", records=llm_records
                ),
                "clean": _pipeline(
                    engine,
                    settings,
                    "clean",
                    [(f"tau{i}", r) for i, r in enumerate(tau)]
                    + [(f"loc{i}", s) for i, s in enumerate(locomo)],
                ),
            }
            prompts = [json.dumps(r, ensure_ascii=False) for r in llm.requests]
        svc = MemoryService(engine=engine, settings=settings)
        svc.start()
        try:
            queries = ["password", "pin", "key", "token", "secret", "login", "card", "favourite"]
            queries += ["cookie", "auth", "passwort", "contraseña", "密码", "mysql", "bot"]
            speakers = sorted({s["conversation"]["speaker_a"] for s in locomo})
            states = _states([r for _, r in tau_records])
            for ns in ("planted", "planted_llm"):
                _, key = create_key(engine=engine, namespace=ns, scopes=["read", "write"])
                with db.read_session(engine) as session:
                    rows = session.execute(
                        select(col(Trajectory.id), col(Trajectory.steps)).where(
                            col(Trajectory.namespace) == ns
                        )
                    ).all()
                read = read_surfaces(
                    svc=svc,
                    key=key,
                    states=states,
                    queries=queries + speakers,
                    trajectories=[(tid, len(steps)) for tid, steps in rows],
                )
                for name, texts in read.items():
                    surfaces.setdefault(name, []).extend(texts)
            served_clean = _served(svc, "clean", _states(tau[:40]), queries + speakers)
        finally:
            svc.close()
        t0 = time.perf_counter()
        clean = [(f"clean-{n}", {**tau[i % len(tau)], "id": f"clean-tau-{i}"})
                 for i, (n, *_) in enumerate(VARIANTS)]  # fmt: skip
        clean += [(f"clean-loc-{i}", _plant_locomo(locomo[i % len(locomo)], None,
                   f"clean-loc-{i}")) for i in range(len(VARIANTS))]  # fmt: skip
        pg = PG_ADMIN.rsplit("/", 1)[0] if args.backend == "postgresql" else None
        # and each phrasing as a run's own id: the key its dead letter, task run and log
        # lines are named by
        keyed = [(f"key-{p['variant']}", {**tau[(i + 44) % len(tau)], "id": p["text"]})
                 for i, p in enumerate(planted)]  # fmt: skip
        nights = prefect_nights(tau_records + loc_records + keyed, clean, pg, dbs)
        prefect_seconds = round(time.perf_counter() - t0, 1)
    finally:
        engine.dispose()
        logging.getLogger().removeHandler(logs)
        for name in [n for n in (dbname, *dbs) if n]:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    surfaces["llm_prompts"] = prompts
    surfaces["logs"] = logs.lines
    surfaces["prefect"] = [t for n in ("planted", "outage") for p in PARTS for t in nights[n][p]]

    blobs = {name: "\n".join(texts) for name, texts in surfaces.items()}
    by_surface: dict[str, Any] = {}
    for name, blob in blobs.items():
        seen = [p for p in planted if _visible(p["secret"], blob)]
        by_surface[name] = {
            "texts": len(surfaces[name]),
            "bytes": len(blob),
            "redaction_markers": blob.count(MARKER),  # the planted secrets reached it, redacted
            "secrets_visible": len(seen),
            "kinds_visible": sorted({p["class"] for p in seen}),
            "variants_visible": [p["variant"] for p in seen],
        }
    for p in planted:
        p["surfaced"] = [name for name, blob in blobs.items() if _visible(p["secret"], blob)]
    surfaced = [p for p in planted if p["surfaced"]]
    clean_markers = sum(t.count(MARKER) for t in served_clean)
    result = {
        "backend": args.backend,
        "redaction": not args.no_redact,
        "variants": len(VARIANTS),
        "held_out_variants": sum(v[3] for v in VARIANTS),
        "kinds": len({v[1] for v in VARIANTS}),
        "classes": sorted({v[1] for v in VARIANTS}),
        "planted_records": len(tau_records) + len(loc_records) + len(llm_records),
        "secrets_surfaced": len(surfaced),
        "secrets_surfaced_held_out": sum(p["held_out"] for p in surfaced),
        "surfaced_variants": {p["variant"]: p["surfaced"] for p in surfaced},
        "by_surface": by_surface,
        "llm_requests": len(prompts),
        "detected_by_redact": sum(has_secret(p["text"]) for p in planted),
        "detected_by_redact_held_out": sum(has_secret(p["text"]) for p in planted if p["held_out"]),
        "false_positive_strings": fp,
        "clean_served_redaction_markers": clean_markers,
        "served_texts_checked_clean": len(served_clean),
        "pipeline": runs,
        "prefect": prefect_report(nights, planted, _visible, MARKER, prefect_seconds),
        "missed_by_redact": [p["variant"] for p in planted if not has_secret(p["text"])],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "secrets.json"
    both = json.loads(out.read_text()) if out.exists() else {}
    both[args.backend + ("_no_redact" if args.no_redact else "")] = result
    out.write_text(json.dumps(both, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "pipeline"}, indent=2))
    print(json.dumps(runs, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
