"""Network helpers for tests: a free port, a GET, a webhook receiver, the dead-letter alert."""

from __future__ import annotations

import socket
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prefect.client.orchestration import get_client

from tests.helpers.data import REPO


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """Status and body of a GET."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read()


class WebhookSink:
    """A webhook receiver: the alert a Prefect automation sends lands here."""

    def __init__(self) -> None:
        received: list[str] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                received.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alert"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def install_dead_letter_alert(url: str) -> None:
    """deploy/dead-letter-alert.yaml, with a custom webhook block as its notification."""
    import yaml
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.events.schemas.automations import AutomationCore

    block = CustomWebhookNotificationBlock(
        name="alert", url=url, method="POST", json_data={"text": "{{subject}}: {{body}}"}
    )
    block_id = block.save("hindsight-alert", overwrite=True)
    text = (REPO / "deploy" / "dead-letter-alert.yaml").read_text()
    automation = AutomationCore.model_validate(
        yaml.safe_load(text.replace("<BLOCK_ID>", str(block_id)))
    )
    with get_client(sync_client=True) as client:
        client.create_automation(automation)
