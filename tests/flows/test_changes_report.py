"""The night's changes report: the nightly flow's `nightly-changes` artifact, the console's
Changes page and `hindsight changes --since` list the same changes, each card with what
happened to it (created, activated, sent to review, merged into what...) and why."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

from flows.changes import CHANGES_KEY, changes_text
from flows.nightly import nightly
from flows.params import NightlyParams
from memory_api.app import create_app
from memory_core.changes import Change, changes_since
from memory_core.models.columns import utcnow
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from tests.helpers.cli import hindsight
from tests.helpers.data import REPO
from tests.helpers.serve import LiveServer
from tests.helpers.ui import signed_in


def _artifact(flow_run_id) -> str:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    [md] = [a for a in found if a.key == CHANGES_KEY]
    return str(md.data)


CONSOLE = "http://console.example.test:8765"


def test_a_night_lists_what_changed_and_why(
    flow_env, settings, engine, env_for, monkeypatch
) -> None:
    monkeypatch.setenv("HINDSIGHT_SERVE__CONSOLE_URL", CONSOLE + "/")
    before = utcnow() - timedelta(seconds=1)
    state = nightly(NightlyParams(input=[str(REPO / "examples")]), return_state=True)
    assert state.is_completed(), state.message
    changes = changes_since(engine=engine, since=before)
    kinds = {c.what for c in changes}
    assert "created" in kinds and kinds & {"activated", "sent to review"}, kinds
    assert all(c.actor and c.reason for c in changes)
    # validation's decisions (no version of their own) and the serving gate's after them
    decided = [c for c in changes if c.what in ("activated", "sent to review")]
    assert {c.actor for c in decided} <= {"validator", "gate"}
    assert any(c.actor == "validator" for c in decided)
    created = {c.card_id for c in changes if c.what == "created"}
    assert {c.card_id for c in decided} <= created  # each decision names a card of tonight
    # the artifact: every change, each card linked to its console page
    text = _artifact(state.state_details.flow_run_id)
    assert f"**{len(changes)} changes tonight**" in text
    for c in changes[:5]:
        assert f"]({CONSOLE}/ui/cards/{c.card_id}) | {c.what} |" in text
        assert c.evidence >= 1 and f"| {c.evidence} | {c.actor} |" in text
    assert f"[Changes page]({CONSOLE}/ui/changes?since=" in text
    # the CLI prints the same rows
    listed = json.loads(
        hindsight(env_for, "changes", "--since", before.isoformat(), "-f", "json").stdout
    )
    assert [(x["card_id"], x["what"]) for x in listed] == [
        (str(c.card_id), c.what) for c in changes
    ]
    assert [x["evidence"] for x in listed] == [c.evidence for c in changes]
    table = hindsight(env_for, "changes", "--since", before.isoformat()).stdout
    assert f"{len([c for c in changes if c.what == 'created'])} created" in table
    # and the console's page, for the namespace of the key
    svc = MemoryService(engine=engine, settings=settings)
    key = create_key(engine=engine, namespace="default", scopes=["read"])[1]
    with LiveServer(create_app(svc)) as server, signed_in(server.url, key) as c:
        page = c.get("/ui/changes", params={"since": before.isoformat()})
        assert page.status_code == 200
        assert f"({len(changes)})" in page.text
        assert f"/ui/cards/{changes[0].card_id}" in page.text


def test_changes_refuses_a_bad_date(env_for) -> None:
    proc = hindsight(env_for, "changes", "--since", "yesterday-ish", check=False)
    assert proc.returncode == 2 and "not an ISO date" in proc.stderr


def test_without_a_console_address_the_report_names_cards_without_links() -> None:
    c = Change(
        utcnow(), uuid.uuid4(), "ns", "a scenario", "merged", "consolidator", "near", None, 3
    )
    into = Change(utcnow(), uuid.uuid4(), "ns", "s", "merged", "consolidator", "why", c.card_id, 4)
    text = changes_text([c, into], None)
    assert "](" not in text and "/ui/cards/" not in text
    assert f"| `{str(c.card_id)[:8]}` | merged |  | 3 | consolidator |" in text
    assert f"| merged | `{str(c.card_id)[:8]}` | 4 |" in text
