"""The article's wire format, as the service checks and documents it.

Bodies are Microsoft.Extensions.AI ``ChatMessage`` JSON (``shared/reference/meai-wire.md``).
The pydantic models below are the single description of that format: they produce the
OpenAPI schemas and validate what a client sends. The service validates the parsed JSON
against them but stores the parsed JSON itself, so every key, its order, nulls and
unknown fields survive; the models never rewrite a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

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
)

from ..vocabulary import CONTENT_KINDS, Refused

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


_TAG_FIELD = "chatlab_content_type_tag"


def _content(type_name: str, doc: str, **fields: Any) -> type[_Content]:
    """One ``AIContent`` subtype: ``$type`` fixed to ``type_name`` plus its own keys."""
    # The field's Python name must never be a key a client sends: pydantic looks the union's tag up
    # by name as well as by alias, so a field named "type" read a content's own "type" key as its $type.
    annotations = {_TAG_FIELD: Literal[type_name]}
    namespace: dict[str, Any] = {_TAG_FIELD: Field(alias="$type"), "__doc__": doc}
    for name, (annotation, default) in fields.items():
        annotations[name] = annotation
        namespace[name] = default
    namespace["__annotations__"] = annotations
    name = type_name[0].upper() + type_name[1:] + "Content"
    return type(name, (_Content,), namespace)


#: The keys the service checks, per ``$type``; every other kind in the vocabulary is stored as received.
_CHECKED_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "text": {"text": (StrictStr | None, None)},
    "reasoning": {"text": (StrictStr | None, None), "protectedData": (StrictStr | None, None)},
    "data": {"uri": (StrictStr, ...), "name": (StrictStr | None, None), "mediaType": (StrictStr | None, None)},
    "uri": {"uri": (StrictStr, ...), "mediaType": (StrictStr | None, None)},
    "error": {
        "message": (StrictStr | None, None),
        "errorCode": (StrictStr | None, None),
        "details": (StrictStr | None, None),
    },
    "usage": {"details": (dict[str, Json] | None, None)},
    "functionCall": {
        "callId": (StrictStr, ...),
        "name": (StrictStr, ...),
        "arguments": (dict[str, Json] | None, None),
        "informationalOnly": (StrictBool | None, None),
    },
    "functionResult": {"callId": (StrictStr, ...), "result": (Json, None)},
}

#: Every ``$type`` the service accepts, in the vocabulary's order (the OpenAPI ``oneOf`` lists them so).
CONTENT_TYPES: tuple[str, ...] = tuple(kind.meai for kind in CONTENT_KINDS if kind.meai is not None)
_CONTENT_MODELS = [
    _content(
        kind.meai,
        kind.description or f"MEAI content `{kind.meai}`, stored as received.",
        **_CHECKED_FIELDS.get(kind.meai, {}),
    )
    for kind in CONTENT_KINDS
    if kind.meai is not None
]
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


class ChatHistorySummary(BaseModel):
    """One conversation in ``GET /chat-history``, as it goes on the wire (camelCase keys).

    Only the OpenAPI schema of that answer: the service and the stores hold summaries as
    :class:`chatlab.vocabulary.ConversationSummary`.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "description": "One conversation in ``GET /chat-history``.",  # for API readers, not this docstring
            "examples": [
                {
                    "conversationKey": "286d2f0b7b7a43688ad32556e3610f54",
                    "messageCount": 4,
                    "createdAt": "2026-04-16T01:30:52.123Z",
                    "updatedAt": "2026-04-16T01:31:40.456Z",
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


_messages_adapter = TypeAdapter(list[ChatMessage])


def decode_messages_body(body: bytes, *, max_messages: int) -> list[bytes]:
    """Parse a ``{"messages": [...]}`` body once, check it and return each message as compact JSON.

    Raises :class:`~chatlab.vocabulary.Refused` saying what is wrong; nothing is returned for a bad body,
    so a refused request changes nothing.
    """
    document = _parse_json(body)
    if not isinstance(document, dict) or "messages" not in document:
        raise Refused(400, 'the body must be a JSON object with a "messages" list: {"messages": [...]}')
    messages = document["messages"]
    if not isinstance(messages, list):
        raise Refused(400, f'"messages" must be a list of chat messages, not {_json_type(messages)}')
    if len(messages) > max_messages:
        raise Refused(
            413, f"{len(messages)} messages in one request; the limit is {max_messages}: send them in smaller batches"
        )
    _check_messages(messages)
    return [_encode(message) for message in messages]


def _parse_json(body: bytes) -> Json:
    try:
        # what json.loads(body, parse_constant=...) does, without building a decoder per request
        return _DECODER.decode(body.decode(json.detect_encoding(body), "surrogatepass"))
    except UnicodeDecodeError as exc:
        raise Refused(400, f"the body is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise Refused(400, f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise Refused(400, "the body is nested too deeply to be a chat message") from None


def _reject_constant(name: str) -> None:
    raise Refused(400, f"the body is not valid JSON: {name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _check_messages(messages: list[Json]) -> None:
    try:
        _messages_adapter.validate_python(messages)
    except ValidationError as exc:
        errors = [{"path": _path(("messages", *e["loc"])), "message": _message(e)} for e in exc.errors()]
        first = errors[0]
        more = f' (and {len(errors) - 1} more in "errors")' if len(errors) > 1 else ""
        raise Refused(400, f"{first['path']}: {first['message']}{more}", errors) from None
    for i, message in enumerate(messages):
        for j, content in enumerate(message["contents"]):
            if next(iter(content)) != "$type":
                raise Refused(
                    400,
                    f'messages[{i}].contents[{j}]: "$type" must be the first key of a content object '
                    "(.NET clients cannot read it otherwise)",
                )


def _message(error: Any) -> str:
    """Pydantic's message, reworded where it would talk about its own internals."""
    if error["type"] == "union_tag_invalid":
        return f"unknown $type {error['ctx']['tag']!r}: use one of {', '.join(CONTENT_TYPES)}"
    if error["type"] == "union_tag_not_found":
        return 'missing "$type": every content object starts with one, e.g. {"$type": "text", "text": "..."}'
    message: str = error["msg"]
    return message


def _path(loc: tuple[Any, ...]) -> str:
    """``("messages", 0, "contents", 1, "functionCall", "callId")`` -> ``messages[0].contents[1].callId``."""
    out = ""
    for k, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif k >= 2 and loc[k - 2] == "contents" and part in CONTENT_TYPES:
            continue  # pydantic puts the union's tag into the location
        else:
            out += f".{part}" if out else str(part)
    return out


def _compact_encoder() -> Callable[[Json], str]:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` as one reusable function.

    ``json.dumps`` with options builds an encoder per call; the C encoder built once here is
    what it builds (no circular check: parsed JSON has no cycles), about twice as fast.
    """
    import json.encoder

    encoder: Any = json.encoder  # its C entry points are private: typeshed does not list them
    if encoder.c_make_encoder is None or encoder.c_encode_basestring is None:  # pragma: no cover - no C accelerator
        compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
        return compact.encode
    default = json.JSONEncoder().default  # raises TypeError naming the type, as dumps does
    make = encoder.c_make_encoder(None, default, encoder.c_encode_basestring, None, ":", ",", False, False, True)

    def encode(value: Json) -> str:
        if isinstance(value, str):  # the C encoder's entry point takes containers and scalars alike, but
            quoted: str = encoder.c_encode_basestring(value)  # a bare string is what dumps special-cases
            return quoted
        return "".join(make(value, 0))

    return encode


_to_compact_json = _compact_encoder()


def _encode(message: Json) -> bytes:
    try:
        return _to_compact_json(message).encode()
    except UnicodeEncodeError:
        raise Refused(
            400, "a message holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not valid text"
        ) from None


def _json_type(value: Json) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
