"""Versioned prompt files next to the retrospect stage; the newest version of each is used."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_DIR = Path(__file__).parent / "prompts"
_NAME = re.compile(r"^(?P<name>[a-z_]+)\.v(?P<version>\d+)\.md$")


@dataclass(frozen=True)
class Prompt:
    """A prompt's text and its versioned id (e.g. 'cards.v1')."""

    name: str
    version: int
    text: str

    @property
    def id(self) -> str:
        """name.vN, recorded with every card and cached answer."""
        return f"{self.name}.v{self.version}"


@cache
def load_prompt(name: str) -> Prompt:
    """The newest version of a prompt file."""
    found = [
        (int(m["version"]), p)
        for p in _DIR.iterdir()
        if (m := _NAME.match(p.name)) and m["name"] == name
    ]
    if not found:
        raise FileNotFoundError(f"no prompt file {name}.vN.md in {_DIR}")
    version, path = max(found)
    return Prompt(name, version, path.read_text(encoding="utf-8"))
