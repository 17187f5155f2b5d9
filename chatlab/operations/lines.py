"""The export format: JSON Lines, one conversation a line, ``{"conversationKey": ..., "messages": [...]}``.

Each message is written as the bytes the store holds (compact JSON, so never a line break) and
read back as the bytes the line holds: nothing is decoded and encoded again, so an export
imported elsewhere is the same byte for byte. A line is still parsed whole and each message
checked as the service checks a request (:mod:`chatlab.service.schema`), so a bad line is
refused with its number and what is wrong, and nothing of it is written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from ..service import schema as wire
from ..vocabulary import Refused

# Numbers stay text: only the spans are wanted, and an integer of 4,301+ digits (which the service keeps as
# sent) would otherwise hit Python's int-string limit.
_DECODER = json.JSONDecoder(parse_int=str, parse_float=str)
_SPACE = " \t\r\n"


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
    """The conversation key and the messages' bytes of line ``number``; :class:`BadLine` if it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadLine(number, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        wire.decode_messages_body(raw, max_messages=sys.maxsize)  # checks JSON and every message
    except Refused as exc:
        raise BadLine(number, exc.detail) from None
    document = _DECODER.decode(text)
    key = document.get("conversationKey")
    if not isinstance(key, str) or not key:
        raise BadLine(number, 'no "conversationKey": each line is {"conversationKey": "...", "messages": [...]}')
    return key, [span.encode("utf-8") for span in _message_spans(text)]


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _message_spans(text: str) -> list[str]:
    """The text of each element of the top-level object's ``"messages"`` list (the last, as ``json.loads`` reads)."""
    i, spans = _skip_space(text, 0) + 1, list[str]()  # past "{"
    while True:
        i = _skip_space(text, i)
        if text[i] == "}":
            return spans
        name, i = _DECODER.raw_decode(text, i)
        i = _skip_space(text, i) + 1  # past ":"
        i = _skip_space(text, i)
        if name == "messages":
            spans, i = _list_spans(text, i)
        else:
            _, i = _DECODER.raw_decode(text, i)
        i = _skip_space(text, i)
        if text[i] == ",":
            i += 1


def _list_spans(text: str, i: int) -> tuple[list[str], int]:
    spans, i = list[str](), _skip_space(text, i + 1)  # past "["
    while text[i] != "]":
        _, end = _DECODER.raw_decode(text, i)
        spans.append(text[i:end])
        i = _skip_space(text, end)
        if text[i] == ",":
            i = _skip_space(text, i + 1)
    return spans, i + 1
