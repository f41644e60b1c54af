"""The settings page's table of every setting, generated from the flows' FlowSettings (memory_core's
Settings and the fields only the flows read; here, in the layer that sees both).

    python -m flows.settings_doc          # print the table
    python -m flows.settings_doc --write  # replace it in docs/settings.md, between the markers

tests/memory_core/test_settings_doc.py fails when the page's table differs from the model's.
"""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from flows.settings import FlowSettings
from memory_core.settings_store import default_data_dir

START = "<!-- settings table: python -m flows.settings_doc --write -->"
END = "<!-- end of the settings table -->"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def _nested(info: FieldInfo) -> type[BaseModel] | None:
    """The model a field holds, when its variables are named field by field (`__`)."""
    kind = info.annotation
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def _default(info: FieldInfo) -> str:
    if info.default_factory is default_data_dir:  # found at run time, not this machine's answer
        return "nearest `.hindsight` up, else the user data directory"
    value = info.get_default(call_default_factory=True)
    if value is None or isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str | int | float | Path):
        return f"`{value}`"
    return f"`{json.dumps(to_jsonable_python(value), separators=(', ', ': '))}`"


def _about(info: FieldInfo) -> str:
    text = " ".join((info.description or "").split())  # a docstring's lines as one
    if typing.get_origin(info.annotation) is typing.Literal:
        text += (
            ("; " if text else "")
            + "one of "
            + ", ".join(f"`{v}`" for v in typing.get_args(info.annotation))
        )
    return text.replace("|", "\\|")


def _rows(model: type[BaseModel], prefix: str) -> Iterator[list[str]]:
    for name, info in model.model_fields.items():
        inner = _nested(info)
        if inner is not None:
            yield from _rows(inner, f"{prefix}{name.upper()}__")
        else:
            yield [f"`{prefix}{name.upper()}`", _default(info), _about(info)]


def rows() -> Iterator[list[str]]:
    """(variable, default, description) of every setting, nested models field by field."""
    yield from _rows(FlowSettings, "HINDSIGHT_")  # Settings' fields, then the flows' own


def table() -> str:
    """The Markdown table of every setting."""
    lines = ["| variable | default | what |", "|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows()]
    return "\n".join(lines)


def page_table(text: str) -> str:
    """The table as the settings page holds it (between the markers)."""
    start, end = text.index(START) + len(START), text.index(END)
    return text[start:end].strip()


def main(argv: list[str] | None = None) -> None:
    """Print the table, or (--write) put it into docs/settings.md."""
    args = sys.argv[1:] if argv is None else argv
    if "--write" not in args:
        print(table())
        return
    text = PAGE.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    PAGE.write_text(text[:start] + "\n" + table() + "\n" + text[end:])


if __name__ == "__main__":
    main()
