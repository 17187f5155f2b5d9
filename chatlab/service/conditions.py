"""A write's conditions, read and evaluated in one place: ``If-Match`` (the version the client saw) and
``Idempotency-Key`` (a retry gets the first answer). Each endpoint declares the headers it honours; from that come
what it reads and its OpenAPI parameters, so OpenAPI lists exactly the headers each write honours. Appends, ``PUT``,
``DELETE`` and ``PATCH`` hand ``If-Match`` to the store, which checks it atomically with the write; a fork checks it
against the source's version, with :meth:`Conditions.check`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from ..stores.base import Idempotency, VersionMismatch, version_matches
from ..vocabulary import Refused
from .security.conditions import IDEMPOTENCY_KEY_PATTERN, parse_idempotency_key, parse_if_match

IF_MATCH = "If-Match"
IDEMPOTENCY_KEY = "Idempotency-Key"


@dataclass(frozen=True, slots=True)
class Conditions:
    """What a write's headers ask: ``if_match`` versions (``None``: no condition) and an idempotency key."""

    if_match: Collection[str] | None = None
    idempotency_key: str | None = None

    def check(self, version: str) -> None:
        """:class:`VersionMismatch` (a 412 carrying ``version`` as the ``ETag``) unless ``If-Match`` holds."""
        if not version_matches(version, self.if_match):
            raise VersionMismatch(version)

    def idempotency(self, fingerprint: str, ttl: float) -> Idempotency | None:
        """The store's idempotency record for this request, when it carries a key."""
        if self.idempotency_key is None:
            return None
        return Idempotency(self.idempotency_key, fingerprint, ttl)


NONE = Conditions()


def read_conditions(request: Request, honoured: Collection[str]) -> Conditions:
    """The honoured condition headers of ``request`` (a 400 that says what is wrong with a malformed one), in one pass
    over the raw headers. The first ``If-Match`` counts; several ``Idempotency-Key`` lines are one list (RFC 9110
    section 5.3), so joined they are refused as malformed."""
    if_match = None
    keys = []
    for name, value in request.scope["headers"]:
        if name == b"if-match":
            if if_match is None:
                if_match = value.decode("latin-1")
        elif name == b"idempotency-key":
            keys.append(value.decode("latin-1"))
    if if_match is None and not keys:  # the common write
        return NONE
    versions = parse_if_match(if_match) if IF_MATCH in honoured else None
    key = None
    if keys and IDEMPOTENCY_KEY in honoured:
        try:
            key = parse_idempotency_key(", ".join(keys))
        except ValueError as exc:
            raise Refused(400, str(exc)) from None
    return Conditions(versions, key)


def documented(honoured: Collection[str], writes: str) -> list[dict[str, Any]]:
    """The OpenAPI Parameter Objects of the honoured headers; ``writes`` names what the write does, in words."""
    headers = {
        IF_MATCH: {
            "description": f"{writes} only if the conversation is still at one of these ETags (from a GET or an "
            'earlier write); `*`: only if it exists; `"0"`: only if it does not. Otherwise 412 and nothing changes '
            "(a weak or malformed tag never matches).",
            "schema": {"type": "string"},
            "example": '"5f0c9a7e2b4d1e83.4"',
        },
        IDEMPOTENCY_KEY: {
            "description": "A unique key per request (for example a UUID), of 1 to 255 printable ASCII characters: a "
            "quoted string (an RFC 8941 String, as the IETF draft defines the header) or the same characters unquoted "
            '(`"abc"` and `abc` are one key; unquoted, no spaces, quotes or backslashes); anything else gets 400. '
            "A retry with the same key and request is answered as the first time, whatever happened since, and "
            "writes nothing; the same key with another request gets 422.",
            "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
            "example": '"8e03978e-40d5-43e8-bc93-6894a57f9324"',
        },
    }
    return [{"name": name, "in": "header", "required": False, **headers[name]} for name in honoured]
