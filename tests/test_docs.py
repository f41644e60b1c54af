"""The documentation: the site builds offline with no warning, and every shell block of the
README and of docs/*.md runs in a fresh clone of the repository (or says, in a marker before
it, why not). The README's blocks run first (its `make run` makes the store the others read),
then each page's, in the order of the site's navigation.

A marker is an HTML comment on the line before a block:
    <!-- docs-test: skip: REASON -->            the whole block is not run
    <!-- docs-test: skip "PREFIX": REASON -->   its lines starting with PREFIX are not run
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.data import REPO

README = REPO / "README.md"
VENV = Path(sys.prefix)
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
MARKER = re.compile(r'<!-- docs-test: skip(?: "(?P<prefix>[^"]+)")?: (?P<reason>.+?) -->')
# what a block's output must hold, by a command it runs: the block did its work, not just exit 0
EXPECT = {
    "make run": "query them with",
    "hindsight cards query": "push_image",
    "PORT=": '"use_id"',
}
# remote assets a page could pull in (links to other sites are fine, fetched resources are not)
REMOTE_ASSET = re.compile(
    r"""<(?:script|img|iframe)\b[^>]*\bsrc=["']?(?:https?:)?//"""
    r"""|<link\b[^>]*\bhref=["']?(?:https?:)?//[^>]*>"""
    r"""|url\(\s*["']?(?:https?:)?//""",
    re.I,
)


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    text: str
    marker: re.Match[str] | None

    def script(self) -> str:
        """The block's commands, less the lines its marker leaves out."""
        prefix = self.marker and self.marker["prefix"]
        lines = self.text.splitlines()
        return "\n".join(ln for ln in lines if not (prefix and ln.startswith(prefix)))


def readme_blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with the docs-test marker on the line before it."""
    blocks = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append(Block(line, m[1], m[2], MARKER.search(before)))
    return blocks


PAGES = [README] + [
    REPO / "docs" / line.split(":", 1)[1].strip()
    for line in (REPO / "mkdocs.yml").read_text().splitlines()
    if line.strip().startswith("- ") and line.rstrip().endswith(".md")
]


def shell_blocks(path: Path) -> list[tuple[Path, Block]]:
    """The page's bash blocks, each with its page."""
    blocks = readme_blocks(path.read_text())
    return [(path, b) for b in blocks if b.lang in ("bash", "sh", "shell")]


SHELL = shell_blocks(README)
EVERY_SHELL = [pb for page in PAGES for pb in shell_blocks(page)]


def test_the_readme_is_a_few_screens() -> None:
    assert len(README.read_text().splitlines()) < 300
    first = SHELL[0][1]
    assert first.text.startswith("make run"), "make run first, on the first screen"
    assert "make test" in first.text and first.line < 40


def test_the_readme_links_lead_to_files() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local
    missing = [link for link in local if not (REPO / link).exists()]
    assert missing == []


def test_the_readme_json_blocks_parse() -> None:
    blocks = [b for b in readme_blocks(README.read_text()) if b.lang == "json"]
    assert blocks
    for b in blocks:
        json.loads(b.text)


def test_a_marker_names_what_it_skips_and_why() -> None:
    marker = '<!-- docs-test: skip "make test": the suite itself -->'
    text = f"{marker}\n```bash\nmake run\nmake test\n```\n"
    (block,) = readme_blocks(text)
    assert block.script() == "make run"
    assert block.marker is not None and block.marker["reason"] == "the suite itself"
    (plain,) = readme_blocks("text\n```bash\nls\n```\n")
    assert plain.marker is None and plain.script() == "ls"


def test_the_site_builds_offline_with_no_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    config = str(REPO / "mkdocs.yml")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config, "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    pages = list(site.rglob("*.html"))
    assert len(pages) >= len(list((REPO / "docs").glob("*.md")))
    for path in [*pages, *site.rglob("*.css")]:
        hit = REMOTE_ASSET.search(path.read_text(errors="replace"))
        assert hit is None, f"{path.relative_to(site)} loads {hit and hit[0]!r} from the network"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh clone of the repository's HEAD that reuses this test's venv as its .venv."""
    if not all((VENV / f".installed{s}").exists() for s in ("", "-dev")):
        pytest.skip(f"{VENV} was not made by `make`: the clone's make would install into it")
    root = tmp_path_factory.mktemp("clone") / "hindsight"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(root)], check=True, timeout=120)
    (root / ".venv").symlink_to(VENV)
    # the venv is installed: its make markers must be newer than the clone's install inputs
    for name in ("pyproject.toml", "constraints.txt"):
        os.utime(root / name, (0, 0))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HINDSIGHT_", "PREFECT_", "VIRTUAL_ENV", "PYTEST_", "COV_"))
    }
    env.update(
        PATH=f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(root),  # the clone's code, not the venv's editable install
        PORT=str(_free_port()),
        COLUMNS="200",
    )
    yield root, env


def test_every_page_of_the_site_is_checked() -> None:
    assert {p.name for p in PAGES[1:]} == {p.name for p in (REPO / "docs").glob("*.md")}


@pytest.mark.timeout(1500)
@pytest.mark.parametrize(
    ("page", "block"),
    EVERY_SHELL,
    ids=[f"{p.relative_to(REPO)}:{b.line}" for p, b in EVERY_SHELL],
)
def test_a_shell_block_runs_in_a_fresh_clone(
    page: Path, block: Block, clone: tuple[Path, dict[str, str]]
) -> None:
    where = f"{page.relative_to(REPO)} line {block.line}"
    if block.marker and not block.marker["prefix"]:
        pytest.skip(f"{where}: {block.marker['reason']}")
    root, env = clone
    proc = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", block.script()],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own group: a server it started is stopped with it
    )
    started = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=1200)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    print(f"{where}: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, f"{where} failed:\n{out[-4000:]}"
    expected = next((v for k, v in EXPECT.items() if k in block.script()), "")
    assert expected in out, f"{where} printed no {expected!r}:\n{out[-4000:]}"
