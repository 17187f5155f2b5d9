"""The article's wire format, Microsoft.Extensions.AI ``ChatMessage`` JSON (``shared/reference/meai-wire.md``). The
pydantic models below are its one description: they make the OpenAPI schemas and validate what a client sends. The
service stores the parsed JSON itself, so every key, its order, nulls and unknown fields survive."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

import msgspec
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
    create_model,
)

from ..stores import metadata
from ..vocabulary import CONTENT_KINDS, Refused
from . import jsontext, pieces, precheck

Json = Any


def _iso8601(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 timestamp such as 2024-06-01T12:00:00+00:00") from None
    return value


Timestamp = Annotated[StrictStr, AfterValidator(_iso8601), Field(json_schema_extra={"format": "date-time"})]


class _Content(BaseModel):
    """Base keys of every ``AIContent``; unknown keys are allowed and kept."""

    model_config = ConfigDict(extra="allow")

    annotations: list[dict[str, Json]] | None = None
    additionalProperties: dict[str, Json] | None = None


# The tag field's Python name must never be a key a client sends: pydantic looks the union's tag up
# by name as well as by alias, so a field named "type" read a content's own "type" key as its $type.
_TAG_FIELD = "chatlab_content_type_tag"
_TEXT: tuple[Any, Any] = (StrictStr | None, None)  # an optional string
_NEEDED: tuple[Any, Any] = (StrictStr, ...)  # a required string
#: The keys the service checks, per ``$type``; every other kind in the vocabulary is stored as received.
_CHECKED_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "text": {"text": _TEXT},
    "reasoning": {"text": _TEXT, "protectedData": _TEXT},
    "data": {"uri": _NEEDED, "name": _TEXT, "mediaType": _TEXT},
    "uri": {"uri": _NEEDED, "mediaType": _TEXT},
    "error": {"message": _TEXT, "errorCode": _TEXT, "details": _TEXT},
    "usage": {"details": (dict[str, Json] | None, None)},
    "functionCall": {
        "callId": _NEEDED,
        "name": _NEEDED,
        "arguments": (dict[str, Json] | None, None),
        "informationalOnly": (StrictBool | None, None),
    },
    "functionResult": {"callId": _NEEDED, "result": (Json, None)},
}


def _content(name: str, description: str | None) -> type[_Content]:
    """One ``AIContent`` subtype: ``$type`` fixed to ``name`` plus the keys checked for it."""
    keys: dict[str, Any] = {_TAG_FIELD: (Literal[name], Field(alias="$type")), **_CHECKED_FIELDS.get(name, {})}
    doc = description or f"MEAI content `{name}`, stored as received."
    return create_model(name[0].upper() + name[1:] + "Content", __base__=_Content, __doc__=doc, **keys)


#: Every ``$type`` the service accepts, in the vocabulary's order (the OpenAPI ``oneOf`` lists them so).
CONTENT_TYPES: tuple[str, ...] = tuple(kind.meai for kind in CONTENT_KINDS if kind.meai is not None)
_CONTENT_MODELS = [_content(kind.meai, kind.description) for kind in CONTENT_KINDS if kind.meai is not None]
if TYPE_CHECKING:  # a union built at run time is beyond a type checker: each member is a _Content
    AIContent = _Content
else:
    AIContent = Annotated[
        Union[tuple(_CONTENT_MODELS)],  # noqa: UP007 - a runtime-built union needs the Union form
        Field(discriminator=_TAG_FIELD),
    ]


class ChatMessage(BaseModel):
    """A Microsoft.Extensions.AI ``ChatMessage``; unknown keys are allowed and kept."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "role": "user",
                    "authorName": "Fred",
                    "messageId": "msg42",
                    "createdAt": "2024-06-01T12:00:00+00:00",
                    "contents": [{"$type": "text", "text": "現在時刻を教えてください"}],
                    "additionalProperties": {"metaKey": "metaValue"},
                }
            ]
        },
    )

    authorName: StrictStr | None = None
    createdAt: Timestamp | None = None
    role: Annotated[StrictStr, Field(min_length=1, examples=["user", "assistant", "system", "tool"])]
    contents: Annotated[
        list[AIContent],
        Field(
            description='The message\'s contents. In each item `"$type"` must be the first key, as .NET writes it '
            "(its polymorphic reader needs the discriminator first); a body where it is not is refused with 400."
        ),
    ]
    messageId: StrictStr | None = None
    additionalProperties: dict[str, Json] | None = None


_EXAMPLE_MESSAGES: list[JsonValue] = [
    {"role": "user", "contents": [{"$type": "text", "text": "現在時刻を教えてください"}]},
    {
        "authorName": "SampleAgent",
        "role": "assistant",
        "contents": [{"$type": "functionCall", "name": "GetDateTime", "arguments": {}, "callId": "call_1"}],
    },
    {"role": "tool", "contents": [{"$type": "functionResult", "result": "2026-04-16 01:30:52", "callId": "call_1"}]},
    {
        "authorName": "SampleAgent",
        "role": "assistant",
        "contents": [{"$type": "text", "text": "現在の日時は **2026-04-16 01:30:52** です。"}],
    },
]


class AppendChatMessagesRequest(BaseModel):
    """Body of ``POST /chat-history/{conversationKey}``: messages to add at the end."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [{"messages": _EXAMPLE_MESSAGES}]})
    messages: list[ChatMessage]


class ReplaceChatMessagesRequest(AppendChatMessagesRequest):
    """Body of ``PUT /chat-history/{conversationKey}``: the conversation's new messages."""


class Participant(BaseModel):
    """One author of a conversation's messages and how many it signed."""

    authorName: str
    messageCount: int


PARTICIPANTS_ORDER = "the one with most first, ties by name"
"""The order of every list of participants (:func:`chatlab.authors.ranked`), in the words OpenAPI shows."""


class ChatHistorySummary(BaseModel):
    """One conversation in ``GET /chat-history``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "conversationKey": "286d2f0b7b7a43688ad32556e3610f54",
                    "messageCount": 4,
                    "createdAt": "2026-04-16T01:30:52.123Z",
                    "updatedAt": "2026-04-16T01:31:40.456Z",
                    "participants": [{"authorName": "Planner", "messageCount": 2}],
                }
            ],
        }
    )
    conversationKey: str
    messageCount: int
    createdAt: datetime | None = Field(
        default=None, description="When the conversation was created (ISO 8601, UTC); added to the article's fields."
    )
    updatedAt: datetime | None = Field(
        default=None, description="When it was last written (ISO 8601, UTC): retention counts from it."
    )
    title: str | None = Field(default=None, description="Its title, when one was set with `PATCH`.")
    tags: dict[str, str] | None = Field(
        default=None,
        description="Its tags, when it has any (`PATCH`); a fork carries `chatlab.forkOf` (the conversation it "
        "was forked from) and `chatlab.forkThrough` (how many of its messages).",
    )
    participants: list[Participant] | None = Field(
        default=None,
        description=f"Who took part, when any message is signed: each `authorName` and how many messages it signed, "
        f"{PARTICIPANTS_ORDER}; counted as messages are written, so a listing reads no message.",
    )


class ConversationParticipants(BaseModel):
    """Answer of ``GET /chat-history/{conversationKey}/participants``: who took part (docs/agents.md)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "conversationKey": "team-42",
                    "messageCount": 6,
                    "participants": [
                        {"authorName": "Planner", "messageCount": 2},
                        {"authorName": "Worker", "messageCount": 2},
                    ],
                }
            ],
        }
    )
    conversationKey: str
    messageCount: int = Field(description="Every message of the conversation, signed or not.")
    participants: list[Participant] = Field(
        description=f"Each `authorName` and how many messages it signed, {PARTICIPANTS_ORDER}; user messages "
        "usually carry none."
    )


#: The metadata rule's patterns (:mod:`chatlab.stores.metadata`), anchored as JSON Schema wants them.
_TAG_NAME_SCHEMA = {"pattern": f"^{metadata.TAG_NAME_PATTERN}$", "minLength": 1, "maxLength": metadata.MAX_TAG_NAME}
_TEXT_SCHEMA = f"^{metadata.TEXT_PATTERN}$"
_TAG_VALUE = Field(max_length=metadata.MAX_TAG_VALUE, json_schema_extra={"pattern": _TEXT_SCHEMA})


def _tag_names_schema(schema: dict[str, Any]) -> None:
    """``propertyNames``: the tag names' rule, which a ``dict`` of plain strings does not describe."""
    schema["propertyNames"] = _TAG_NAME_SCHEMA


class ConversationMetadataPatch(BaseModel):
    """Body of ``PATCH /chat-history/{conversationKey}``: a JSON merge patch (RFC 7396) of the title and tags.

    A string sets, ``null`` removes, and what the body does not name stays. This model describes the body in
    OpenAPI; :mod:`.patches` reads it with the one metadata rule."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"title": "Trip to Kyoto", "tags": {"user": "u42", "draft": None}}]},
    )
    title: StrictStr | None = Field(
        default=None,
        max_length=metadata.MAX_TITLE,
        json_schema_extra={"pattern": _TEXT_SCHEMA},
        description="`null` removes the title.",
    )
    tags: dict[str, Annotated[StrictStr, _TAG_VALUE] | None] = Field(
        default_factory=dict,
        max_length=metadata.MAX_TAGS,
        description=f"Tags to set, or remove with `null`; a conversation carries at most {metadata.MAX_TAGS}.",
        json_schema_extra=_tag_names_schema,
    )


class ServiceInfo(BaseModel):
    """Body of ``GET /``."""

    service: str
    description: str


class Problem(BaseModel):
    """An RFC 9457 problem document: every 4xx/5xx body of the service."""

    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="One entry per invalid field: where (JSON path) and what is wrong."
    )


#: The refusal of a body nested deeper than a parser or validator on its way takes (each has its own limit).
TOO_DEEP = "the body is nested too deeply for a chat message: flatten it"
#: The most validation errors listed in one answer (a body can hold 500,000 invalid items).
MAX_ERRORS = 100
_messages_adapter = TypeAdapter(list[ChatMessage])
_ADAPTERS: dict[pieces.Kind, TypeAdapter[Any]] = {
    "messages": _messages_adapter,
    "contents": TypeAdapter(list[AIContent]),
}
#: The same checks as msgspec structs, to pass the common valid body quickly (:mod:`.precheck`).
_PRECHECKED = precheck.structs({kind: _CHECKED_FIELDS.get(kind, {}) for kind in CONTENT_TYPES}, _TAG_FIELD)


def decode_messages_body(
    body: bytes, *, max_messages: int, max_message_bytes: int | None = None, in_pieces: bool = False
) -> list[bytes]:
    """Each message of a ``{"messages": [...]}`` body as compact JSON, every number's text kept (:mod:`.jsontext`).
    Limits (413) are checked before the schema (400), the cheap before the dear. ``in_pieces`` (a large body, in a
    worker thread): validated, encoded and freed in pieces that each hold the GIL briefly."""
    try:
        stored = None if in_pieces else _already_stored_form(body, max_messages, max_message_bytes)
        if stored is not None:
            return stored
        document = jsontext.parse(body)
        try:
            return _decode(document, max_messages, max_message_bytes, in_pieces)
        finally:
            if in_pieces:  # here, not where a refusal is handled (on the event loop)
                _release(document)
    except jsontext.InvalidJson as exc:
        raise Refused(400, str(exc)) from None
    except RecursionError:  # raised cleanly by each parser and encoder at its own depth limit
        raise Refused(400, TOO_DEEP) from None


#: What a compact body starts and ends with: the provider's, and any client's that writes compact JSON.
_COMPACT_HEAD, _COMPACT_TAIL = b'{"messages":[', b"]}"


def _already_stored_form(body: bytes, max_messages: int, max_message_bytes: int | None) -> list[bytes] | None:
    """The messages of a body exactly as msgspec would write it, each as sent: no number-keeping parse nor encoding
    (an append's dearest steps). ``None`` at any doubt: the full parse decides, with the same answer or refusal."""
    if not (body.startswith(_COMPACT_HEAD) and body.endswith(_COMPACT_TAIL)):
        return None
    try:
        messages = msgspec.json.decode(body)["messages"]  # the last "messages", if the body repeats the key
        if not isinstance(messages, list) or len(messages) > max_messages:
            return None
        encoded = [msgspec.json.encode(message) for message in messages]
        if _COMPACT_HEAD + b",".join(encoded) + _COMPACT_TAIL != body:
            return None
        too_large = max_message_bytes is not None and encoded and max(map(len, encoded)) > max_message_bytes
        if too_large or not precheck.valid("messages", messages, _PRECHECKED) or _misplaced_type(messages):
            return None
    except (msgspec.MsgspecError, ValueError, RecursionError):  # not JSON, numbers out of range, or too deep
        return None
    stored, start = [], len(_COMPACT_HEAD)
    for message in encoded:  # slices of the body: an encoding keeps spare bytes
        stored.append(body[start : start + len(message)])
        start += len(message) + 1
    return stored


def _decode(document: Json, max_messages: int, max_message_bytes: int | None, in_pieces: bool) -> list[bytes]:
    if not isinstance(document, dict) or "messages" not in document:
        raise Refused(400, 'the body must be a JSON object with a "messages" list: {"messages": [...]}')
    messages = document["messages"]
    if not isinstance(messages, list):
        raise Refused(400, f'"messages" must be a list of chat messages, not {_json_type(messages)}')
    if len(messages) > max_messages:
        raise Refused(
            413, f"{len(messages)} messages in one request; the limit is {max_messages}: send them in smaller batches"
        )
    encoded = [jsontext.encode(message, long_list="contents" if in_pieces else None) for message in messages]
    for i, message in enumerate(encoded):
        if max_message_bytes is not None and len(message) > max_message_bytes:
            raise Refused(
                413,
                f"messages[{i}] is {len(message)} bytes as compact JSON; the limit is {max_message_bytes} bytes "
                "per message",
            )
    _check_messages(messages, pieces.cut(messages) if in_pieces else [("messages", messages, pieces.shifted(0))])
    return encoded


def _release(document: Json) -> None:
    messages = document.get("messages") if isinstance(document, dict) else None
    if isinstance(messages, list):
        for message in messages:
            contents = message.get("contents") if isinstance(message, dict) else None
            if isinstance(contents, list):
                jsontext.release(contents)
        jsontext.release(messages)


def _check_messages(messages: list[Json], parts: Iterable[tuple[pieces.Kind, Json, pieces.Where]]) -> None:
    errors: list[dict[str, str]] = []
    for kind, value, where in parts:
        if precheck.valid(kind, value, _PRECHECKED):
            continue  # certainly valid: pydantic would build models only to find nothing wrong
        try:
            _ADAPTERS[kind].validate_python(value)
        except ValidationError as exc:
            errors += [{"path": _path(("messages", *where(e["loc"]))), "message": _message(e)} for e in exc.errors()]
            if len(errors) >= MAX_ERRORS:
                break
    if errors:
        errors = errors[:MAX_ERRORS]
        first, more = errors[0], len(errors) - 1
        listed = f' (and {more} more in "errors")' if more else ""
        stopped = f"; checking stopped after {MAX_ERRORS} errors" if len(errors) == MAX_ERRORS else ""
        raise Refused(400, f"{first['path']}: {first['message']}{listed}{stopped}", errors)
    misplaced = _misplaced_type(messages)
    if misplaced:
        raise Refused(
            400,
            f'{misplaced}: "$type" must be the first key of a content object (.NET clients cannot read it otherwise)',
        )


def _misplaced_type(messages: list[Json]) -> str:
    """Where the first content of valid ``messages`` whose first key is not ``$type`` is, or ``""``."""
    for i, message in enumerate(messages):
        for j, content in enumerate(message["contents"]):
            if next(iter(content)) != "$type":
                return f"messages[{i}].contents[{j}]"
    return ""


def _message(error: Any) -> str:
    """Pydantic's message, reworded where it would talk about its own internals."""
    if error["type"] == "union_tag_invalid":
        return f"unknown $type {error['ctx']['tag']!r}: use one of {', '.join(CONTENT_TYPES)}"
    if error["type"] == "union_tag_not_found":
        return 'missing "$type": every content object starts with one, e.g. {"$type": "text", "text": "..."}'
    return str(error["msg"])


def _path(loc: tuple[Any, ...]) -> str:
    """``("messages", 0, "contents", 1, "functionCall", "callId")`` -> ``messages[0].contents[1].callId``."""
    out = ""
    for k, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif k < 2 or loc[k - 2] != "contents" or part not in CONTENT_TYPES:  # pydantic puts the tag in the loc
            out += f".{part}" if out else str(part)
    return out


def _json_type(value: Json) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
