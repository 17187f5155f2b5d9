"""The export format: JSON Lines, one conversation a line, ``{"conversationKey": ..., "messages": [...]}``.

Each message is written as the bytes the store holds (compact JSON, so never a line break). A line
read back is checked as the service checks a request and its messages encoded by the service's own
encoder (:func:`chatlab.service.schema.decode_messages_body`), so an import stores what an API write
of the same messages would: an export of what the service stored comes back byte for byte, and a
hand-written file with spaces is stored compact. A bad line is refused with its number and what is
wrong, and nothing of it is written.

Lines are read in a bounded way (:func:`numbered_lines`): a line longer than the limit is reported,
never held whole, so a huge line costs at most the limit in memory. A UTF-8 byte-order mark before
the first line is skipped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO, Protocol, runtime_checkable

from ..service import schema as wire
from ..vocabulary import Refused

# Numbers stay text: only the key and the spans are wanted, and an integer of 4,301+ digits (which the service
# keeps as sent) would otherwise hit Python's int-string limit.
_DECODER = json.JSONDecoder(parse_int=str, parse_float=str)
_SPACE = " \t\r\n"
BOM = b"\xef\xbb\xbf"


class BadLine(ValueError):
    """A line that is not a conversation; ``line`` is its number (from 1)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


def encode_line(conversation_key: str, messages: Sequence[bytes]) -> bytes:
    """One conversation as a line (with its ``\\n``), the messages joined as they are."""
    key = json.dumps(conversation_key, ensure_ascii=False).encode()
    return b'{"conversationKey":' + key + b',"messages":[' + b",".join(messages) + b"]}\n"


def parse_line(raw: bytes, number: int) -> tuple[str, list[bytes]]:
    """The conversation key and the messages (compact, as the service stores them) of line ``number``.

    :class:`BadLine` if it is not a conversation the service would take.
    """
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadLine(number, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        messages = wire.decode_messages_body(raw, max_messages=sys.maxsize)  # checks JSON and every message
    except Refused as exc:
        raise BadLine(number, exc.detail) from None
    except (ValueError, RecursionError) as exc:  # a parser's own limit (nesting, say): still just this line
        raise BadLine(number, f"not a conversation the service would take ({type(exc).__name__}: {exc})") from None
    try:
        document = _DECODER.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise BadLine(number, f"not valid JSON ({exc})") from None
    key = document.get("conversationKey") if isinstance(document, dict) else None
    if not isinstance(key, str) or not key:
        raise BadLine(number, 'no "conversationKey": each line is {"conversationKey": "...", "messages": [...]}')
    return key, messages


def numbered_lines(source: BinaryIO | Iterable[bytes], limit: int) -> Iterator[tuple[int, bytes | None]]:
    """Each line of ``source`` with its number (from 1), without its line break; ``None`` for one over ``limit``.

    A file is read with ``readline`` bounded by the limit (the rest of a long line too, while it is skipped), so
    no more than the limit is ever held. A UTF-8 byte-order mark at the very start is dropped.
    """
    lines = _bounded(source, limit) if isinstance(source, _Readable) else iter(source)
    for number, line in enumerate(lines, 1):
        if line is not None and number == 1 and line.startswith(BOM):
            line = line[len(BOM) :]
        body = None if line is None else line.rstrip(b"\r\n")
        yield number, (body if body is not None and len(body) <= limit else None)


@runtime_checkable
class _Readable(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


def _bounded(stream: _Readable, limit: int) -> Iterator[bytes | None]:
    """The lines of ``stream``; ``None`` for one longer than ``limit`` (and a mark and a line break), not kept."""
    most = limit + len(BOM) + 2
    while True:
        line = stream.readline(most)
        if not line:
            return
        if len(line) == most and not line.endswith(b"\n"):
            while True:  # the rest of the long line, a chunk at a time, dropped
                rest = stream.readline(most)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
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
