"""What a request names besides its body: the conversation key, ``If-Match``, ``Idempotency-Key``,
``after`` and ``limit``.

Each is declared here for the OpenAPI description, and checked as that description says when
the direct routes read it themselves (:mod:`.direct_routes`); a bad one is a 400 problem.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Header, Path, Query, Request

from ..vocabulary import Refused
from .security.conditions import IDEMPOTENCY_KEY_PATTERN
from .settings import KEY_PATTERN, ServiceSettings

IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        description="Write (or delete) only if the conversation is still at one of these ETags (from a GET or an "
        'earlier write); `*`: only if it exists; `"0"`: only if it does not. Otherwise 412 and nothing changes '
        "(a weak or malformed tag never matches).",
        examples=['"5f0c9a7e2b4d1e83.4"'],
    ),
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="A unique key per append (for example a UUID): a quoted string (an RFC 8941 String, as the "
        "IETF draft defines the header) of 1 to 255 printable ASCII characters; anything else gets 400. Retrying "
        "with the same key and messages appends once and answers as the first time; the same key with other "
        "messages gets 422.",
        examples=['"8e03978e-40d5-43e8-bc93-6894a57f9324"'],
        json_schema_extra={"pattern": IDEMPOTENCY_KEY_PATTERN},
    ),
]
#: ``after`` and ``limit`` are positions; this bound keeps them within every store's integers.
MAX_POSITION = 2**53
_DIGITS = len(str(MAX_POSITION))
After = Annotated[
    int | None,
    Query(
        ge=0,
        le=MAX_POSITION,
        description="Skip the first N messages: only the ones after them. A client that holds the first N "
        "messages of the version in its `ETag` fetches just the new ones; past the end: `[]`.",
        examples=[20],
    ),
]
Limit = Annotated[
    int | None,
    Query(
        ge=1, le=MAX_POSITION, description="At most this many messages (a page); a `Link` header names the next one."
    ),
]


def conversation_key_dependency(settings: ServiceSettings) -> Any:
    """The dependency that checks a conversation key against the configured pattern and length."""
    pattern = re.compile(settings.key_pattern)
    max_length = settings.key_max_length
    rule = _key_rule(settings)

    def check(key: str) -> str:
        if not (1 <= len(key) <= max_length and pattern.fullmatch(key)):
            raise Refused(400, f"invalid conversationKey: {rule}")
        return key

    async def conversation_key(
        key: str = Path(
            alias="conversationKey",
            description=f"The conversation; {rule}.",
            examples=["286d2f0b7b7a43688ad32556e3610f54"],
            json_schema_extra={"pattern": settings.key_pattern, "minLength": 1, "maxLength": max_length},
        ),
    ) -> str:
        return check(key)

    conversation_key.check = check  # type: ignore[attr-defined]  # the same check, called directly (.direct_routes)
    return conversation_key


def _key_rule(settings: ServiceSettings) -> str:
    """What a valid key is, in words for people when the pattern is the default one."""
    if settings.key_pattern == KEY_PATTERN:
        return f"use 1 to {settings.key_max_length} letters, digits, '_' or '-' (for example a GUID without dashes)"
    return f"use 1 to {settings.key_max_length} characters matching {settings.key_pattern}"


def refuse_unknown_query(request: Request, known: tuple[str, ...]) -> None:
    """A 400 for a query parameter the endpoint does not take (``?afer=3`` would otherwise read everything)."""
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        raise Refused(400, f"unknown query parameter {unknown[0]!r}: this endpoint takes {' and '.join(known)} only")


def read_position(request: Request, name: str, minimum: int) -> int | None:
    """A query parameter that is a position (``after``) or a count (``limit``), checked as its OpenAPI says."""
    value = request.query_params.get(name)
    if value is None:
        return None
    digits = value[1:] if value.startswith("-") else value
    # at most as many digits as MAX_POSITION has: int() of thousands of them raises, and they are out of range
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
