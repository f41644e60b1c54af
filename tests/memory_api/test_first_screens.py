"""What a new user meets first: `serve` names the console, and `/` leads to it."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from tests.helpers.data import REPO
from tests.helpers.net import free_port


def test_serve_names_the_console_and_root_leads_there(env_for) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_cli", "serve", "--port", str(port)],
        cwd=REPO,
        env=env_for,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        said = [proc.stderr.readline() for _ in range(2)]
        base = f"http://127.0.0.1:{port}"
        assert said[0].strip() == f"console: {base}/ui", said
        assert said[1].startswith(f"read API on {base}")
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(base + "/", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert r.status_code == 307 and r.headers["location"] == "/ui"
        page = httpx.get(base + "/", follow_redirects=True, timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "/" not in httpx.get(base + "/openapi.json", timeout=10).json()["paths"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
