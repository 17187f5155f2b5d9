"""What a request names besides its body (the conversation key, ``If-Match``, ``Idempotency-Key``, the query), read by
a conversation's endpoints themselves (FastAPI solving parameters is the dearest part of serving one), so described
here for OpenAPI. A bad one, or an unknown query parameter, is a 400."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import Request

from ..vocabulary import Refused
from .security.conditions import IDEMPOTENCY_KEY_PATTERN
from .settings import KEY_PATTERN, ServiceSettings


def _parameter(
    where: str, name: str, text: str, schema: dict[str, Any], example: Any, required: bool = False
) -> dict[str, Any]:
    """An OpenAPI Parameter Object."""
    return {"name": name, "in": where, "required": required, "description": text, "schema": schema, "example": example}


IF_MATCH = _parameter(
    "header",
    "If-Match",
    "Write (or delete) only if the conversation is still at one of these ETags (from a GET or an earlier write); "
    '`*`: only if it exists; `"0"`: only if it does not. Otherwise 412 and nothing changes (a weak or malformed tag '
    "never matches).",
    {"type": "string"},
    '"5f0c9a7e2b4d1e83.4"',
)
IDEMPOTENCY_KEY = _parameter(
    "header",
    "Idempotency-Key",
    "A unique key per append (for example a UUID), of 1 to 255 printable ASCII characters: a quoted string (an RFC "
    '8941 String, as the IETF draft defines the header) or the same characters unquoted (`"abc"` and `abc` are one '
    "key; unquoted, no spaces, quotes or backslashes); anything else gets 400. Retrying with the same key and "
    "messages appends once and answers as the first time; the same key with other messages gets 422.",
    {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
    '"8e03978e-40d5-43e8-bc93-6894a57f9324"',
)
#: ``after`` and ``limit`` are positions; this bound keeps them within every store's integers.
MAX_POSITION = 2**53
_DIGITS = len(str(MAX_POSITION))


def _position(name: str, minimum: int, example: int, text: str) -> dict[str, Any]:
    """A query parameter that is a position or a count (:func:`read_position`)."""
    return _parameter("query", name, text, {"type": "integer", "minimum": minimum, "maximum": MAX_POSITION}, example)


AFTER = _position(
    "after",
    0,
    20,
    "Skip the first N messages: only the ones after them. A client that holds the first N messages of the version "
    "in its `ETag` fetches just the new ones; past the end: `[]`.",
)
LIMIT = _position("limit", 1, 50, "At most this many messages (a page); a `Link` header names the next one.")


def conversation_key_check(settings: ServiceSettings) -> Callable[[str], str]:
    """The check of a conversation key against the configured pattern and length (a 400 saying what a key is)."""
    pattern, max_length, rule = re.compile(settings.key_pattern), settings.key_max_length, _key_rule(settings)

    def check(key: str) -> str:
        if not (1 <= len(key) <= max_length and pattern.fullmatch(key)):
            raise Refused(400, f"invalid conversationKey: {rule}")
        if _CONTROL.search(key):  # whatever the pattern allows: no store keeps them all (PostgreSQL refuses NUL)
            raise Refused(400, "invalid conversationKey: it holds a control character (such as NUL); remove it")
        return key

    return check


def conversation_key_parameter(settings: ServiceSettings) -> dict[str, Any]:
    """The OpenAPI description of the ``conversationKey`` path parameter, as the settings make it."""
    schema = {"type": "string", "pattern": settings.key_pattern, "minLength": 1, "maxLength": settings.key_max_length}
    text = f"The conversation; {_key_rule(settings)}."
    return _parameter("path", "conversationKey", text, schema, "286d2f0b7b7a43688ad32556e3610f54", required=True)


#: Control characters (C0, DEL, C1) and lone surrogates, refused in any key: a store may not keep them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _key_rule(settings: ServiceSettings) -> str:
    """What a valid key is, in words for people when the pattern is the default one."""
    if settings.key_pattern == KEY_PATTERN:
        return f"use 1 to {settings.key_max_length} letters, digits, '_' or '-' (for example a GUID without dashes)"
    return f"use 1 to {settings.key_max_length} characters matching {settings.key_pattern}"


def refuse_unknown_query(request: Request, known: tuple[str, ...]) -> None:
    """A 400 for a query parameter the endpoint does not take (``?afer=3`` would read everything)."""
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        takes = f"{' and '.join(known)} only" if known else "no query parameters"
        raise Refused(400, f"unknown query parameter {unknown[0]!r}: this endpoint takes {takes}")


def read_position(request: Request, name: str, minimum: int) -> int | None:
    """A query parameter that is a position or a count, checked as its OpenAPI says."""
    value = request.query_params.get(name)
    if value is None:
        return None
    digits = value[1:] if value.startswith("-") else value
    # at most as many digits as MAX_POSITION has (int() of thousands of them raises)
    number = int(value) if value.isascii() and digits.isdigit() and len(digits) <= _DIGITS else None
    if number is None or not minimum <= number <= MAX_POSITION:
        raise Refused(400, f"query parameter {name}={value!r}: use a whole number from {minimum} to {MAX_POSITION}")
    return number


def parse_header(parse: Any, value: str | None) -> Any:
    """``parse(value)``, its ``ValueError`` (which says what is wrong with the header) made a 400."""
    try:
        return parse(value)
    except ValueError as exc:
        raise Refused(400, str(exc)) from None


VIEW = _parameter(
    "query",
    "view",
    "`summary`: the latest summary checkpoint and every message after the ones it summarizes, instead of the whole "
    "conversation (docs/conversations.md); `after` and `limit` then page through the view.",
    {"type": "string", "enum": ["summary"]},
    "summary",
)
THROUGH = _position("through", 1, 4, "How many of the first messages the fork holds (default: all of them).")


#: The longest ``?author=`` (an agent's name).
MAX_AUTHOR = 256
AUTHOR = _parameter(
    "query",
    "author",
    "Only the messages this author signed (their `authorName`, docs/agents.md), in order; `after` and `limit` then "
    "page through them.",
    {"type": "string", "minLength": 1, "maxLength": MAX_AUTHOR},
    "Planner",
)


def read_author(request: Request) -> str | None:
    """The ``author`` a read is filtered by, ``None`` when absent; empty, too long or repeated is a 400."""
    if not request.scope["query_string"]:
        return None
    values = request.query_params.getlist("author")
    if not values:
        return None
    if len(values) > 1:
        raise Refused(400, "query parameter author is repeated: name one author (read once per author)")
    if not 1 <= len(values[0]) <= MAX_AUTHOR:
        raise Refused(400, f"query parameter author: name an author in 1 to {MAX_AUTHOR} characters")
    return values[0]


def read_query(request: Request) -> tuple[int | None, int | None, bool]:
    """``after`` and ``limit`` of a read (``None`` when absent), and whether it asks for ``view=summary``."""
    if not request.scope["query_string"]:  # the common read: no query to parse
        return None, None, False
    refuse_unknown_query(request, ("after", "limit", "view", "author"))
    after, limit = read_position(request, "after", 0), read_position(request, "limit", 1)
    view = request.query_params.get("view")
    if view not in (None, "summary"):
        raise Refused(400, f"query parameter view={view!r}: the only view is 'summary' (or leave view out)")
    return after, limit, view == "summary"


def condition_headers(request: Request) -> tuple[str | None, str | None]:
    """The first ``If-Match`` and the ``Idempotency-Key``, in one pass over the raw headers. Several
    ``Idempotency-Key`` lines are one list (RFC 9110 section 5.3), so joined they are refused as malformed."""
    if_match, keys = None, []
    for name, value in request.scope["headers"]:
        if name == b"if-match":
            if if_match is None:
                if_match = value.decode("latin-1")
        elif name == b"idempotency-key":
            keys.append(value.decode("latin-1"))
    return if_match, ", ".join(keys) if keys else None
