"""HTTP side of versions and idempotency: ``ETag``, ``If-Match`` and ``Idempotency-Key`` (docs/protections.md,
"Safe concurrent updates" and "Safe retries"; draft-ietf-httpapi-idempotency-key-header)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import http_sf

from ...stores.base import ANY, EncodedMessage
from ...vocabulary import Version

IDEMPOTENCY_KEY_MAX_LENGTH = 255
IDEMPOTENCY_KEY_PATTERN = r'^(?:"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\]){1,255}"|[\x21\x23-\x5b\x5d-\x7e]{1,255})$'
"""An ``Idempotency-Key`` header's OpenAPI pattern: an sf-string (RFC 8941 section 3.3.3) of 1 to 255 characters,
or the unquoted form. A String's parameters after it (``;name=value``) are ignored, as the draft defines none."""


def etag(version: str) -> str:
    """The strong entity tag of a version as a store keeps it: ``"<version>"``, its count without leading zeros."""
    count = version.rpartition(".")[2]
    if len(count) < 2 or count[0] != "0":  # as the stores write versions: nothing to parse (every answer's path)
        return f'"{version}"'
    parsed = Version.parse(version)
    return f'"{version}"' if parsed is None else parsed.etag


def parse_if_match(value: str | None) -> tuple[str, ...] | None:
    """The versions an ``If-Match`` header accepts (``("*",)`` for ``*``); ``None`` without the header. Weak tags are
    dropped (never strongly equal), an unquoted tag is read as if quoted, and what is not a version is kept as is, so it
    never matches (412, nothing written)."""
    if value is None:
        return None
    if value.strip() == "*":
        return (ANY,)
    versions: list[str] = []
    for part in value.split(","):
        tag = part.strip()
        if tag.startswith("W/"):
            continue
        if len(tag) >= 2 and tag[0] == tag[-1] == '"':
            tag = tag[1:-1]
        if tag and tag != ANY:
            version = Version.parse(tag)
            versions.append(tag if version is None else str(version))
    return tuple(versions)


#: A String without escapes, whitespace around it or parameters: its characters are the key.
_PLAIN_KEY = re.compile(r'"[\x20\x21\x23-\x5b\x5d-\x7e]{1,255}"')
#: The unquoted form most clients send (Stripe's, for one): printable ASCII without space, quote or backslash.
_TOKEN_KEY = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,255}")


def parse_idempotency_key(value: str | None) -> str | None:
    """The key of an ``Idempotency-Key`` header (the String, unquoted); ``None`` without the header."""
    if value is None:
        return None
    if _PLAIN_KEY.fullmatch(value):  # the usual key, as the provider sends it: what http_sf would return
        return value[1:-1]
    if _TOKEN_KEY.fullmatch(value):  # unquoted: the same key as quoted
        return value
    try:  # header values come as Latin-1 text: encoding gives back the bytes that were sent
        item = http_sf.parse(value.encode("latin-1"), tltype="item")  # (value, parameters)
    except (http_sf.StructuredFieldError, UnicodeEncodeError):
        item = None
    key = item[0] if isinstance(item, tuple) else None
    if type(key) is not str or not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX_LENGTH:
        raise ValueError(
            f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters, quoted (an RFC "
            '8941 String; \\ escapes " and \\) or unquoted without spaces, quotes or backslashes, for example a '
            'UUID: Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324" or Idempotency-Key: 8e03978e40d543e8'
        )
    return key


def fingerprint(operation: str, messages: Sequence[EncodedMessage]) -> str:
    """A digest of a request's meaning: the operation and its encoded messages (whitespace-independent)."""
    # each message after its length: the same bytes hashed as one update per part did, in one call
    framed = b"".join([len(message).to_bytes(8, "big") + message for message in messages])
    return hashlib.sha256(operation.encode() + b"\n" + framed).hexdigest()
