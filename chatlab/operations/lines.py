"""The export format: JSON Lines, one conversation a line, ``{"conversationKey": ..., "messages": [...]}``, with
``"title"`` and ``"tags"`` only when it has them. Messages are written as the store holds them; a line read back is
checked and encoded by the service's own decoder, so an import stores what an API write of the same messages would.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol, runtime_checkable

from ..service import schema as wire
from ..stores.metadata import MAX_TAGS, MetadataChange, MetadataError
from ..vocabulary import Refused


class _Number(str):
    """A JSON number's text (never taken for a string): only the key, the metadata and the spans are wanted, and
    an integer of 4,301+ digits (which the service keeps as sent) would hit Python's int-string limit."""


_DECODER = json.JSONDecoder(parse_int=_Number, parse_float=_Number)
_SPACE = " \t\r\n"
BOM = b"\xef\xbb\xbf"


class BadLine(ValueError):
    """A line that is not a conversation; ``line`` is its number (from 1)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Line:
    """One conversation of a file; its messages compact, as the service stores them."""

    conversation_key: str
    messages: list[bytes]
    title: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_metadata(self) -> bool:
        """Whether the line carries a title or tags."""
        return self.title is not None or bool(self.tags)


def _text(value: str) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def encode_line(
    conversation_key: str, messages: Sequence[bytes], title: str | None = None, tags: Mapping[str, str] | None = None
) -> bytes:
    """One conversation as a line (with its ``\\n``), the messages joined as they are."""
    head = b'{"conversationKey":' + _text(conversation_key)
    if title is not None:
        head += b',"title":' + _text(title)
    if tags:
        head += b',"tags":{' + b",".join(_text(n) + b":" + _text(v) for n, v in sorted(tags.items())) + b"}"
    return head + b',"messages":[' + b",".join(messages) + b"]}\n"


def parse_line(raw: bytes, number: int) -> tuple[str, list[bytes]]:
    """The key and the messages of line ``number`` (:func:`parse_conversation` without its metadata)."""
    line = parse_conversation(raw, number)
    return line.conversation_key, line.messages


def parse_conversation(raw: bytes, number: int) -> Line:
    """Line ``number`` as a conversation; :class:`BadLine` if it is not one the service would take."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadLine(number, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        messages = wire.decode_messages_body(raw, max_messages=sys.maxsize)  # checks JSON and every message
    except Refused as exc:
        raise BadLine(number, exc.detail) from None
    except (ValueError, RecursionError) as exc:  # a parser's own limit (nesting, say): still just this line
        raise BadLine(number, f"not a conversation the service would take ({type(exc).__name__}: {exc})") from None
    try:
        document = _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise BadLine(number, f"not valid JSON ({exc})") from None
    key = document.get("conversationKey") if isinstance(document, dict) else None
    if type(key) is not str or not key:
        raise BadLine(number, 'no "conversationKey": each line is {"conversationKey": "...", "messages": [...]}')
    title, tags = _metadata(document, number)
    return Line(key, messages, title, tags)


def _metadata(document: dict[str, object], number: int) -> tuple[str | None, dict[str, str]]:
    """The ``"title"`` and ``"tags"`` of a line (none when it has neither), checked as ``PATCH`` checks them."""
    title, tags = document.get("title"), document.get("tags")
    tags = {} if tags is None else tags
    if title is not None and type(title) is not str:
        raise BadLine(number, '"title" must be a string (or left out)')
    if not isinstance(tags, dict) or not all(type(value) is str for value in tags.values()):
        raise BadLine(number, '"tags" must be an object whose values are strings, {"name": "value", ...}')
    if len(tags) > MAX_TAGS:
        raise BadLine(number, f'"tags": {len(tags)} tags; a conversation carries at most {MAX_TAGS}')
    try:
        MetadataChange.setting(title, tags)
        json.dumps([title, tags], ensure_ascii=False).encode()  # no lone surrogate ("\\ud800"): not text
    except UnicodeEncodeError:
        raise BadLine(number, '"title" or "tags" holds a lone surrogate escape: not text') from None
    except MetadataError as exc:
        raise BadLine(number, str(exc)) from None
    return title, {str(name): str(value) for name, value in tags.items()}


def numbered_lines(source: BinaryIO | Iterable[bytes], limit: int) -> Iterator[tuple[int, bytes | None]]:
    """Each line of ``source`` with its number (from 1), without its line break or a starting UTF-8 byte-order
    mark; ``None`` for one over ``limit``, never held whole (a file is read with a bounded ``readline``)."""
    lines = _bounded(source, limit) if isinstance(source, _Readable) else iter(source)
    for number, line in enumerate(lines, 1):
        body = None if line is None else (line.removeprefix(BOM) if number == 1 else line).rstrip(b"\r\n")
        yield number, (body if body is not None and len(body) <= limit else None)


@runtime_checkable
class _Readable(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


def _bounded(stream: _Readable, limit: int) -> Iterator[bytes | None]:
    """The lines of ``stream``; ``None`` for one longer than ``limit`` (and a mark and a line break)."""
    most = limit + len(BOM) + 2
    for line in iter(lambda: stream.readline(most), b""):
        if len(line) == most and not line.endswith(b"\n"):
            rest = line
            while rest and not rest.endswith(b"\n"):  # the rest of the long line, a chunk at a time, dropped
                rest = stream.readline(most)
            yield None
        else:
            yield line


def split_array(body: bytes) -> list[bytes]:
    """The bytes of each element of a JSON array, as they are in ``body`` (the service's stored messages)."""
    text = body.decode("utf-8")
    _DECODER.decode(text)  # a valid array, or ValueError
    spans, i = list[str](), _skip_space(text, len(text) - len(text.lstrip()) + 1)  # past "["
    while text[i] != "]":
        _, end = _DECODER.raw_decode(text, i)
        spans.append(text[i:end])
        i = _skip_space(text, end)
        if text[i] == ",":
            i = _skip_space(text, i + 1)
    return [span.encode("utf-8") for span in spans]


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i
