"""What a request names in its query, declared once per endpoint: a frozen dataclass whose fields each carry a
:class:`Parameter` (its name, how its text is read, its OpenAPI description). From that one declaration come the
parsing (:func:`read_query`), the 400 answers and the OpenAPI parameters (:func:`documented`); ``HEAD`` reads
``GET``'s. An unknown parameter, a single-valued one given twice and a value that does not parse are each a 400 that
names them. Endpoints read the query themselves: FastAPI solving parameters is the dearest part of serving one."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from fastapi import Request

from ..stores.metadata import MAX_TAG_NAME, MAX_TAG_VALUE, TAG_NAME_PATTERN, TEXT_PATTERN
from ..vocabulary import Refused
from .keys import KeyRule

#: ``after`` and ``limit`` are positions; this bound keeps them within every store's integers.
MAX_POSITION = 2**53
_DIGITS = len(str(MAX_POSITION))
#: The largest page of ``GET /chat-history?limit=L``.
MAX_PAGE = 1000

Reader = Callable[[str, str, KeyRule], Any]


@dataclass(frozen=True, slots=True)
class Parameter:
    """One query parameter: how one value's text is read (``read(name, text, keys)``, a 400 when it does not
    parse), whether it may be repeated (then its values come as a tuple), and its OpenAPI description."""

    name: str
    description: str
    read: Reader
    schema: dict[str, Any]
    example: Any
    repeatable: bool = False
    #: A conversation key: documented with the configured key rule's schema (:meth:`KeyRule.schema`).
    is_key: bool = False


def declared(parameter: Parameter) -> Any:
    """A field of a query declaration: absent, ``None`` (or ``()`` when repeatable); ``parameter`` reads it."""
    default: Any = () if parameter.repeatable else None
    return dataclasses.field(default=default, metadata={"parameter": parameter})


_DECLARED: dict[type[Any], dict[str, Parameter]] = {}


def _parameters(declaration: type[Any]) -> dict[str, Parameter]:
    """The declaration's parameters, by the name of the field each fills (read once per declaration)."""
    declared = _DECLARED.get(declaration)
    if declared is None:
        declared = {field.name: field.metadata["parameter"] for field in dataclasses.fields(declaration)}
        _DECLARED[declaration] = declared
    return declared


Query = TypeVar("Query")


def read_query(declaration: type[Query], request: Request, keys: KeyRule) -> Query:
    """The request's query as ``declaration`` declares it; a 400 naming an unknown or repeated parameter."""
    text = request.scope["query_string"]
    if not text:  # the common request: nothing to parse
        return declaration()
    given: dict[str, list[str]] = {}
    for name, value in parse_qsl(text.decode("latin-1"), keep_blank_values=True, encoding="utf-8"):
        given.setdefault(name, []).append(value)
    by_field = _parameters(declaration)
    known = [parameter.name for parameter in by_field.values()]
    unknown = [name for name in given if name not in known]
    if unknown:
        takes = " and ".join(known) if known else "no query parameters"
        raise Refused(400, f"unknown query parameter {unknown[0]!r}: this endpoint takes {takes}")
    values: dict[str, Any] = {}
    for field, parameter in by_field.items():
        texts = given.get(parameter.name)
        if texts is None:
            continue
        if len(texts) > 1 and not parameter.repeatable:
            raise Refused(400, f"query parameter {parameter.name} is given {len(texts)} times: give it once")
        read = [parameter.read(parameter.name, value, keys) for value in texts]
        values[field] = tuple(read) if parameter.repeatable else read[0]
    return declaration(**values)


def documented(declaration: type[Any], keys: KeyRule) -> list[dict[str, Any]]:
    """The OpenAPI Parameter Objects of ``declaration`` (a key's schema is the configured rule's)."""
    return [_openapi(parameter, keys) for parameter in _parameters(declaration).values()]


def _openapi(parameter: Parameter, keys: KeyRule) -> dict[str, Any]:
    schema = keys.schema() if parameter.is_key else parameter.schema
    example = parameter.example
    if parameter.repeatable:
        schema = {"type": "array", "items": schema, "minItems": 1}
        example = [example]
    return {
        "name": parameter.name,
        "in": "query",
        "required": False,
        "description": parameter.description,
        "schema": schema,
        "example": example,
    }


def position(name: str, minimum: int, maximum: int, example: int, description: str) -> Parameter:
    """A whole number from ``minimum`` to ``maximum``, in plain ASCII digits (no sign, space, point or exponent)."""

    def read(name: str, text: str, keys: KeyRule) -> int:
        # at most as many digits as MAX_POSITION has (int() of thousands of them raises)
        if text.isascii() and text.isdigit() and len(text) <= _DIGITS and minimum <= int(text) <= maximum:
            return int(text)
        raise Refused(400, f"query parameter {name}={text!r}: use a whole number from {minimum} to {maximum}")

    schema = {"type": "integer", "minimum": minimum, "maximum": maximum}
    return Parameter(name, description, read, schema, example)


def choice(name: str, values: tuple[str, ...], example: str, description: str) -> Parameter:
    """One of ``values``."""

    def read(name: str, text: str, keys: KeyRule) -> str:
        if text not in values:
            raise Refused(400, f"query parameter {name}={text!r}: use one of {', '.join(values)} (or leave it out)")
        return text

    return Parameter(name, description, read, {"type": "string", "enum": list(values)}, example)


def conversation_key(name: str, example: str, description: str) -> Parameter:
    """A conversation key, checked by the one key rule."""

    def read(name: str, text: str, keys: KeyRule) -> str:
        return keys.check(text, what=f"query parameter {name}")

    return Parameter(name, description, read, {"type": "string"}, example, is_key=True)


#: What ``?tag=`` holds: a tag name (the metadata rule's), ``:``, and a value.
_TAG_FILTER = re.compile(f"(?={TAG_NAME_PATTERN}:)[^:]{{1,{MAX_TAG_NAME}}}:{TEXT_PATTERN}")


def _read_tag(name: str, text: str, keys: KeyRule) -> tuple[str, str]:
    tag_name, _, value = text.partition(":")
    if not _TAG_FILTER.fullmatch(text) or len(value) > MAX_TAG_VALUE:
        raise Refused(400, f"query parameter {name}={text[:80]!r}: use name:value, a tag name and its value")
    return tag_name, value


TAG = Parameter(
    "tag",
    "`name:value`: only conversations carrying this tag (repeat for several).",
    _read_tag,
    {"type": "string", "pattern": f"^{TAG_NAME_PATTERN}:{TEXT_PATTERN}$"},
    "user:u42",
    repeatable=True,
)


#: The longest ``?author=`` (an agent's name).
MAX_AUTHOR = 256


def _read_author(name: str, text: str, keys: KeyRule) -> str:
    if not 1 <= len(text) <= MAX_AUTHOR:
        raise Refused(400, f"query parameter {name}: name an author in 1 to {MAX_AUTHOR} characters")
    return text


AUTHOR = Parameter(
    "author",
    "Only the messages this author signed (their `authorName`, docs/agents.md), in order; `after` and `limit` then "
    "page through them.",
    _read_author,
    {"type": "string", "minLength": 1, "maxLength": MAX_AUTHOR},
    "Planner",
)


@dataclass(frozen=True, slots=True)
class MessagesQuery:
    """``GET`` and ``HEAD /chat-history/{conversationKey}``."""

    after: int | None = declared(
        position(
            "after",
            0,
            MAX_POSITION,
            20,
            "Skip the first N messages: only the ones after them. A client that holds the first N messages of the "
            "version in its `ETag` fetches just the new ones; past the end: `[]`.",
        )
    )
    limit: int | None = declared(
        position("limit", 1, MAX_POSITION, 50, "At most this many messages (a page); a `Link` header names the next.")
    )
    view: str | None = declared(
        choice(
            "view",
            ("summary",),
            "summary",
            "`summary`: the latest summary checkpoint and every message after the ones it summarizes, instead of the "
            "whole conversation (docs/conversations.md); `after` and `limit` then page through the view.",
        )
    )
    author: str | None = declared(AUTHOR)


@dataclass(frozen=True, slots=True)
class ListingQuery:
    """``GET /chat-history``."""

    limit: int | None = declared(position("limit", 1, MAX_PAGE, 50, "At most this many (a page)."))
    after: str | None = declared(
        conversation_key(
            "after", "286d2f0b", "Only the conversations whose keys sort after this one (the last key of a page)."
        )
    )
    tag: tuple[tuple[str, str], ...] = declared(TAG)


@dataclass(frozen=True, slots=True)
class ForkQuery:
    """``POST /chat-history/{conversationKey}/fork``."""

    through: int | None = declared(
        position("through", 1, MAX_POSITION, 4, "How many of the first messages the fork holds (default: all).")
    )
    key: str | None = declared(
        conversation_key(
            "key",
            "plan_b",
            "The new conversation's key (checked as any key). Without it the service makes one (32 hex digits, "
            "fixed by the `Idempotency-Key` when one is sent); if such a key does not fit the service's key "
            "settings, the fork is a 400 asking for this parameter.",
        )
    )


@dataclass(frozen=True, slots=True)
class NoQuery:
    """An endpoint that takes no query parameters."""
