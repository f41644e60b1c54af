"""A namespace's snapshot saved to a file, read back on a cold load.

Not pickle (a tampered file must not run code): a magic line, a JSON header line, then the
body: named sections one after another, each a JSON document (tables, strings) or a packed
column of numbers (array.array bytes: one per card, or per ordered list's card). The header
names the format, the database, the namespace, the feed watermark the cards are current at,
each section's name, type and length, and the body's length and CRC: a truncated or altered
file is refused before a section is parsed. Sections are read one at a time, so a load never
holds the whole body and its parsed form at once.

Layer: snapshot.
"""

from __future__ import annotations

import hashlib
import os
import sys
import uuid
import zlib
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import orjson

FORMAT = 3  # 3: a macro's loop variable is not among the variables a card needs
MAGIC = b"HINDSIGHT-SNAPSHOT\n"
TMP_SUFFIX = ".tmp"
MAX_HEADER = 64 * 1024
CHUNK = 1 << 20  # the CRC pass reads this much at a time
JSON = "json"
NUMBERS = frozenset("bBiqd")  # array typecodes a section may hold
Section = tuple[str, str, bytes]  # name, type (JSON or a typecode), bytes


class Rejected(Exception):
    """The file cannot be used; `reason` says why (logged with the file's name)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def file_name(namespace: str) -> str:
    """A namespace's file name: a hash, since namespaces are user input."""
    return hashlib.sha256(namespace.encode()).hexdigest()[:40] + ".snap"


def json_section(name: str, value: Any) -> Section:
    """A section holding one JSON document."""
    return name, JSON, orjson.dumps(value)


def numbers(name: str, typecode: str, values: Any) -> Section:
    """A section holding a packed column (OverflowError: a value the type cannot hold)."""
    return name, typecode, array(typecode, values).tobytes()


def layout(sections: Sequence[Section]) -> tuple[list[list[Any]], list[bytes]]:
    """The header's section list and the body's parts."""
    return [[n, t, len(b)] for n, t, b in sections], [b for _, _, b in sections]


def write(path: Path, header: dict[str, Any], body: Sequence[bytes]) -> None:
    """Write atomically: a temp file beside it, fsynced, renamed over it, the folder fsynced.
    A write killed midway leaves a temp file, never a part of the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    crc = 0
    for part in body:
        crc = zlib.crc32(part, crc)
    size = sum(len(part) for part in body)
    head = orjson.dumps(
        {**header, "format": FORMAT, "byteorder": sys.byteorder, "body_bytes": size, "crc32": crc}
    )
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + head + b"\n")
            f.writelines(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone after the rename; a failed write leaves nothing
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a crash
    finally:
        os.close(folder)


class Body:
    """A checked file's sections, read one at a time from the open file (the file checked is
    the file read: a newer one renamed over it meanwhile is another inode)."""

    def __init__(self, f: IO[bytes], start: int, sections: list[Any]) -> None:
        self._f = f
        self._at: dict[str, tuple[str, int, int]] = {}
        offset = start
        for item in sections:
            if not (
                isinstance(item, list)
                and len(item) == 3
                and isinstance(item[0], str)
                and (item[1] == JSON or item[1] in NUMBERS)
                and type(item[2]) is int
                and item[2] >= 0
                and item[0] not in self._at
            ):
                raise Rejected(f"malformed section entry {item!r}"[:200])
            self._at[item[0]] = (item[1], offset, item[2])
            offset += item[2]
        self.end = offset

    def __contains__(self, name: str) -> bool:
        return name in self._at

    def _bytes(self, name: str, kind: str) -> bytes:
        if name not in self._at:
            raise Rejected(f"no section {name!r}")
        found, offset, size = self._at[name]
        if found != kind:
            raise Rejected(f"section {name!r} holds {found!r}, not {kind!r}")
        self._f.seek(offset)
        data = self._f.read(size)
        if len(data) != size:
            raise Rejected(f"section {name!r} cut short")
        return data

    def json(self, name: str) -> Any:
        """A JSON section's document."""
        try:
            return orjson.loads(self._bytes(name, JSON))
        except orjson.JSONDecodeError as exc:
            raise Rejected(f"malformed section {name!r}: {exc}") from exc

    def numbers(self, name: str, typecode: str, count: int | None = None) -> array[Any]:
        """A packed column (count: how many values it must hold)."""
        data = self._bytes(name, typecode)
        column = array(typecode)
        if len(data) % column.itemsize:
            raise Rejected(f"section {name!r}: {len(data)} bytes, not whole values")
        column.frombytes(data)
        if count is not None and len(column) != count:
            raise Rejected(f"section {name!r}: {len(column)} values, {count} expected")
        return column


def read(f: IO[bytes]) -> tuple[dict[str, Any], Body]:
    """The header and the body of an open file, checked for length and CRC (Rejected
    otherwise); the sections are read from f later."""
    try:
        if f.read(len(MAGIC)) != MAGIC:
            raise Rejected("not a snapshot file")
        line = f.readline(MAX_HEADER)
        if not line.endswith(b"\n"):
            raise Rejected("no header")
        try:
            header = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise Rejected(f"malformed header: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            found = header.get("format") if isinstance(header, dict) else None
            raise Rejected(f"format {found!r}, this version reads {FORMAT}")
        if header.get("byteorder") != sys.byteorder:
            raise Rejected(f"written on a {header.get('byteorder')!r}-endian machine")
        start, crc, size = f.tell(), 0, 0
        while chunk := f.read(CHUNK):  # the CRC in chunks: never the whole body in memory
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    except OSError as exc:
        raise Rejected(f"unreadable: {exc}") from exc
    if size != header.get("body_bytes"):
        raise Rejected(f"truncated: {size} of {header.get('body_bytes')} body bytes")
    if crc != header.get("crc32"):
        raise Rejected("the body's CRC does not match")
    sections = header.get("sections")
    body = Body(f, start, sections if isinstance(sections, list) else [])
    if body.end != start + size:
        raise Rejected("the sections do not fill the body")
    return header, body


def read_header(path: Path) -> dict[str, Any]:
    """A file's header, once its body is checked (Rejected otherwise)."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise Rejected(f"unreadable: {exc}") from exc
    with f:
        return read(f)[0]
