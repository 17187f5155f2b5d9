"""JSON in and out with every number's text kept as sent (``1.10``, ``1e400``), which Python's ``json`` would rewrite
or break: its C parser hands each number's text to :func:`_number`, kept as :class:`msgspec.Raw`. What JSON readers
disagree on is refused (docs/protections.md, "Limits and the rate limit")."""

from __future__ import annotations

import json
from typing import Any

import msgspec

Json = Any
#: Items encoded, or freed, per call. A call holds the GIL, so a long list is encoded (and freed) in calls of
#: this many items, between which the event loop runs; :mod:`.pieces` validates in pieces of fewer.
PIECE = 4096


class InvalidJson(ValueError):
    """A body that is not JSON this service stores; the message says what is wrong and where."""


def parse(body: bytes) -> Json:
    """The JSON document of ``body``, numbers as :class:`msgspec.Raw`; UTF-8 only, a byte order mark tolerated."""
    try:
        text = body.decode()
        return _DECODER.decode(text[1:] if text.startswith("\ufeff") else text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _invalid(body, exc) from None
    except RecursionError:
        raise InvalidJson("the body is nested too deeply to be a chat message") from None


def encode(value: Json, *, long_list: str | None = None) -> bytes:
    """``value`` as compact JSON, numbers as parsed; a long list under key ``long_list`` in :data:`PIECE`-item calls."""
    items = value.get(long_list) if long_list is not None and isinstance(value, dict) else None
    try:
        if not isinstance(items, list) or len(items) <= PIECE:
            return _ENCODER.encode(value)
        head, _, tail = _ENCODER.encode({**value, long_list: _HOLE}).partition(b"\0")
        pieces = [_ENCODER.encode(items[i : i + PIECE])[1:-1] for i in range(0, len(items), PIECE)]
        return b"".join((head, b"[", b",".join(pieces), b"]", tail))
    except UnicodeEncodeError:
        raise InvalidJson(
            "a message holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not valid text"
        ) from None


def object_mentioning(message: bytes, mark: bytes) -> dict[str, Json] | None:
    """The stored message as a JSON object when its bytes mention ``mark``; ``None`` without decoding it otherwise
    (most messages do not mention what a reader looks for), or when it is not an object."""
    if mark not in message:
        return None
    try:
        item = msgspec.json.decode(message)
    except msgspec.DecodeError:
        return None
    return item if isinstance(item, dict) else None


def release(items: list[Json]) -> None:
    """Empty a long list :data:`PIECE` items at a time (from the end), so a thread freeing it lets others run."""
    while items:
        del items[-PIECE:]


def _invalid(body: bytes, error: UnicodeDecodeError | json.JSONDecodeError) -> InvalidJson:
    """What is wrong with ``body``, in words: UTF-16 or UTF-32 text first (which the error would hide)."""
    encoding = json.detect_encoding(body)
    if encoding not in ("utf-8", "utf-8-sig"):
        return InvalidJson(f"the body is {encoding.upper()} text, not UTF-8: send JSON as UTF-8")
    if isinstance(error, UnicodeDecodeError):
        return InvalidJson(f"the body is not UTF-8 text: {error.reason} at byte {error.start}")
    return InvalidJson(f"the body is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}")


def _number(text: str) -> msgspec.Raw:
    """A number kept as the text it was sent as (JSON's grammar has already checked it)."""
    return msgspec.Raw(text.encode())


def _object(pairs: list[tuple[str, Json]]) -> dict[str, Json]:
    """An object, refused if it repeats a key (which reader's value would count is anyone's guess)."""
    value = dict(pairs)
    if len(value) < len(pairs):  # a key is repeated: the first one named again
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise InvalidJson(
                    f"the body repeats the key {json.dumps(key, ensure_ascii=False)} in one object: "
                    "send each key once (JSON readers disagree on which of the values counts)"
                )
            seen.add(key)
    return value


def _constant(name: str) -> None:
    raise InvalidJson(f"the body is not valid JSON: {name} is not a JSON number")


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_number, parse_int=_number, parse_constant=_constant)
_ENCODER = msgspec.json.Encoder()
_HOLE = msgspec.Raw(b"\0")  # where a long list goes: encoded JSON never holds a raw NUL byte
