"""The codec: MAF Message/Content <-> MEAI ChatMessage JSON, lossless both ways.

Property tests build random messages on one side, convert them to the other side and back,
and compare (MAF by ``to_dict()``, JSON by equality). The JSON in between goes through
``json.dumps``/``json.loads`` as it would over HTTP, and is checked by the service's own
validator, so what the codec writes is also what the service accepts.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from agent_framework import Content, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatlab.client.codec import (
    MAF_EXTRA_KEY,
    MEAI_EXTRA_KEY,
    content_from_meai,
    content_to_meai,
    message_from_meai,
    message_to_meai,
    messages_from_meai,
    messages_to_meai,
)
from chatlab.client.errors import ChatHistoryCodecError
from chatlab.service import schema as wire

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- strategies

names = st.text(min_size=1, max_size=12)
keys = st.text(max_size=10).filter(lambda k: not k.startswith("chatlab."))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(keys, json_values, max_size=3)
maybe = lambda s: st.none() | s  # noqa: E731
media_types = st.sampled_from(["image/png", "audio/wav", "application/pdf", "text/plain", "application/json"])
web_uris = st.builds(lambda p: f"https://example.com/{p}", st.text(alphabet="abcxyz/._-", max_size=12))
maf_annotations = maybe(
    st.lists(st.fixed_dictionaries({"type": st.just("citation"), "title": names, "url": web_uris}), max_size=2)
)
maf_ap = json_objects


@st.composite
def maf_arguments(draw: Any) -> Any:
    kind = draw(st.sampled_from(["none", "dict", "json-text", "spaced-json-text", "not-json", "json-list"]))
    obj = draw(json_objects)
    return {
        "none": None,
        "dict": obj,
        "json-text": json.dumps(obj, separators=(",", ":")),
        "spaced-json-text": json.dumps(obj, indent=1),
        "not-json": draw(st.text(max_size=10)),
        "json-list": "[1, 2]",
    }[kind]


maf_function_call = st.builds(
    Content.from_function_call,
    names,
    names,
    arguments=maf_arguments(),
    informational_only=st.booleans(),
    id=maybe(names),
    status=maybe(names),
    additional_properties=maf_ap,
)

maf_contents = st.one_of(
    st.builds(Content.from_text, st.text(max_size=30), annotations=maf_annotations, additional_properties=maf_ap),
    st.builds(
        Content.from_text_reasoning,
        id=maybe(names),
        text=maybe(st.text(max_size=30)),
        protected_data=maybe(st.text(max_size=10)),
        status=maybe(names),
        additional_properties=maf_ap,
    ),
    st.builds(Content.from_data, st.binary(max_size=12), media_types, name=maybe(names), additional_properties=maf_ap),
    st.builds(
        lambda data, declared, actual: Content.from_uri(
            f"data:{declared};base64,{base64.b64encode(data).decode()}", media_type=actual
        ),
        st.binary(max_size=6),
        media_types,
        maybe(media_types),
    ),
    st.builds(
        Content.from_uri, web_uris, media_type=maybe(media_types), name=maybe(names), additional_properties=maf_ap
    ),
    st.builds(
        Content.from_error,
        message=maybe(st.text(max_size=20)),
        error_code=maybe(names),
        error_details=maybe(st.text(max_size=20)),
        additional_properties=maf_ap,
    ),
    st.builds(
        Content.from_usage,
        st.dictionaries(
            st.sampled_from(
                [
                    "input_token_count",
                    "output_token_count",
                    "total_token_count",
                    "cache_read_input_token_count",
                    "reasoning_output_token_count",
                    "cache_creation_input_token_count",
                    "completion/audio_tokens",
                ]
            ),
            st.integers(0, 10**6),
            max_size=5,
        ),
        additional_properties=maf_ap,
    ),
    maf_function_call,
    st.builds(
        Content.from_function_result,
        names,
        result=st.text(max_size=20) | json_values,
        id=maybe(names),
        status=maybe(names),
        additional_properties=maf_ap,
    ),
    st.builds(lambda c, r: Content("function_result", call_id=c, result=r), names, json_values),
    st.builds(Content.from_hosted_file, names, media_type=maybe(media_types), name=maybe(names)),
    st.builds(Content.from_hosted_vector_store, names, additional_properties=maf_ap),
    # types MEAI has no counterpart for in chatlab: carried whole
    st.builds(lambda fc: Content.from_function_approval_request(fc.id, fc), maf_function_call.filter(lambda c: c.id)),
    st.builds(Content.from_mcp_server_tool_call, names, names, server_name=maybe(names), arguments=maybe(json_objects)),
)

maf_messages = st.builds(
    Message,
    st.sampled_from(["user", "assistant", "system", "tool", "developer"]),
    st.lists(maf_contents, max_size=4),
    author_name=maybe(names),
    message_id=maybe(names),
    additional_properties=maf_ap,
)


def _content(type_name: str, **fields: Any) -> dict[str, Any]:
    """A MEAI content object: ``$type`` first, then the given keys (``None`` values kept as ``null``)."""
    return {"$type": type_name, **fields}


@st.composite
def meai_content(draw: Any) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "text",
                "reasoning",
                "data",
                "uri",
                "error",
                "usage",
                "functionCall",
                "functionResult",
                "hostedFile",
                "hostedVectorStore",
                "toolApprovalRequest",
            ]
        )
    )
    opt_text = maybe(st.text(max_size=20))
    if kind == "text":
        fields = {"text": draw(opt_text)}
    elif kind == "reasoning":
        fields = {"text": draw(opt_text), "protectedData": draw(opt_text)}
    elif kind == "data":
        data = base64.b64encode(draw(st.binary(max_size=8))).decode()
        fields = {"uri": f"data:{draw(media_types)};base64,{data}", "name": draw(maybe(names))}
    elif kind == "uri":
        fields = {"uri": draw(web_uris), "mediaType": draw(media_types)}
    elif kind == "error":
        fields = {"message": draw(opt_text), "errorCode": draw(maybe(names)), "details": draw(opt_text)}
    elif kind == "usage":
        counts = st.integers(0, 10**6)
        details = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "inputTokenCount": counts,
                    "outputTokenCount": counts,
                    "totalTokenCount": counts,
                    "cachedInputTokenCount": counts,
                    "reasoningTokenCount": maybe(counts),
                    "additionalCounts": st.dictionaries(
                        st.sampled_from(["a", "input_token_count", "x/y"]), counts, max_size=2
                    ),
                    "inputAudioTokenCount": counts,
                },
            )
        )
        fields = {"details": details}
    elif kind == "functionCall":
        fields = {"callId": draw(names), "name": draw(names), "arguments": draw(maybe(json_objects))}
        if draw(st.booleans()):
            fields["informationalOnly"] = draw(st.booleans())
    elif kind == "functionResult":
        fields = {"callId": draw(names), "result": draw(json_values)}
    elif kind == "hostedFile":
        fields = {"fileId": draw(names), "mediaType": draw(maybe(media_types)), "name": draw(maybe(names))}
    elif kind == "hostedVectorStore":
        fields = {"vectorStoreId": draw(names)}
    else:
        fields = {"requestId": draw(names), "toolCall": draw(json_objects)}
    # drop some keys entirely (absent and null are different JSON; both must survive)
    fields = {k: v for k, v in fields.items() if draw(st.booleans()) or k in ("uri", "callId", "name", "fileId")}
    if draw(st.booleans()):
        fields["annotations"] = draw(
            st.lists(st.just({"$type": "citation", "title": "t", "url": "https://x"}), max_size=1)
        )
    if draw(st.booleans()):
        fields["additionalProperties"] = draw(json_objects)
    return _content(kind, **fields)


@st.composite
def meai_message(draw: Any) -> dict[str, Any]:
    message: dict[str, Any] = {}
    for key, strategy in (
        ("authorName", maybe(names)),
        ("createdAt", maybe(st.sampled_from(["2024-06-01T12:00:00+00:00", "2026-04-16T01:30:52.123+09:00"]))),
    ):
        if draw(st.booleans()):
            message[key] = draw(strategy)
    message["role"] = draw(st.sampled_from(["user", "assistant", "system", "tool", "critic"]))
    message["contents"] = draw(st.lists(meai_content(), max_size=4))
    if draw(st.booleans()):
        message["messageId"] = draw(maybe(names))
    if draw(st.booleans()):
        message["additionalProperties"] = draw(maybe(json_objects))
    return message


def over_the_wire(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the service would store and give back: JSON text, accepted by its validator."""
    body = json.dumps({"messages": items}, ensure_ascii=False).encode()
    stored = wire.decode_messages_body(body, max_messages=10_000)
    return [json.loads(m) for m in stored]


# --------------------------------------------------------------------------- properties


@PROPERTY
@given(st.lists(maf_messages, max_size=3))
def test_maf_to_json_and_back_is_lossless(messages: list[Message]) -> None:
    items = over_the_wire(messages_to_meai(messages))
    back = messages_from_meai(items)
    assert [m.to_dict() for m in back] == [m.to_dict() for m in messages]


@PROPERTY
@given(st.lists(meai_message(), max_size=3))
def test_json_to_maf_and_back_is_lossless(items: list[dict[str, Any]]) -> None:
    messages = messages_from_meai(items)
    # as MAF would keep them in a session or pass them around
    messages = [Message.from_dict(m.to_dict()) for m in messages]
    assert messages_to_meai(messages) == items


@PROPERTY
@given(maf_messages)
def test_type_comes_first_in_every_content(message: Message) -> None:
    for content in message_to_meai(message)["contents"]:
        assert next(iter(content)) == "$type"


# --------------------------------------------------------------------------- the reference's examples

REFERENCE_MESSAGE = {
    "role": "user",
    "authorName": "Fred",
    "messageId": "msg42",
    "createdAt": "2024-06-01T12:00:00+00:00",
    "contents": [
        {"$type": "text", "text": "Hello, world!"},
        {"$type": "functionCall", "callId": "call1", "name": "myFunc", "arguments": {"param1": "value1"}},
        {"$type": "functionResult", "callId": "call1", "result": "result-value"},
    ],
    "additionalProperties": {"metaKey": "metaValue"},
}

REFERENCE_CONTENTS = [
    {
        "$type": "functionCall",
        "callId": "call123",
        "name": "myFunction",
        "arguments": {"arg1": "value1", "arg2": 42},
        "informationalOnly": True,
        "additionalProperties": {"key": "val"},
    },
    {"$type": "functionResult", "callId": "call123", "result": "the result", "additionalProperties": {"key": "val"}},
    {
        "$type": "data",
        "uri": "data:audio/wav;base64,AQIDBA==",
        "name": "audio.wav",
        "additionalProperties": {"source": "microphone"},
    },
    {"$type": "uri", "uri": "http://localhost/something", "mediaType": "image/png"},
    {"$type": "error", "message": "Error occurred", "errorCode": "ERR001", "details": "Something went wrong"},
    {
        "$type": "usage",
        "details": {
            "inputTokenCount": 10,
            "outputTokenCount": 20,
            "totalTokenCount": 30,
            "cachedInputTokenCount": 5,
            "reasoningTokenCount": 8,
        },
    },
    {"$type": "reasoning", "text": "reasoning text", "protectedData": "protected"},
]


def test_reference_message_maps_onto_maf_fields() -> None:
    message = message_from_meai(REFERENCE_MESSAGE)
    assert (message.role, message.author_name, message.message_id) == ("user", "Fred", "msg42")
    assert message.additional_properties["metaKey"] == "metaValue"
    assert message.additional_properties[MEAI_EXTRA_KEY] == {"createdAt": "2024-06-01T12:00:00+00:00"}
    text, call, result = message.contents
    assert text.type == "text" and text.text == "Hello, world!"
    assert (call.type, call.call_id, call.name, call.arguments) == (
        "function_call",
        "call1",
        "myFunc",
        {"param1": "value1"},
    )
    assert (result.type, result.call_id, result.result) == ("function_result", "call1", "result-value")
    assert message_to_meai(message) == REFERENCE_MESSAGE


@pytest.mark.parametrize("item", REFERENCE_CONTENTS, ids=lambda i: i["$type"])
def test_reference_contents_round_trip_without_extras(item: dict[str, Any]) -> None:
    content = content_from_meai(item)
    assert MEAI_EXTRA_KEY not in content.additional_properties  # everything found a MAF field
    assert content_to_meai(content) == item


def test_reference_fields_land_on_the_maf_names() -> None:
    data, uri, error, usage, reasoning = (content_from_meai(i) for i in REFERENCE_CONTENTS[2:])
    assert (data.type, data.media_type, data.name) == ("data", "audio/wav", "audio.wav")
    assert (uri.type, uri.uri, uri.media_type) == ("uri", "http://localhost/something", "image/png")
    assert (error.message, error.error_code, error.error_details) == (
        "Error occurred",
        "ERR001",
        "Something went wrong",
    )
    assert usage.usage_details == {
        "input_token_count": 10,
        "output_token_count": 20,
        "total_token_count": 30,
        "cache_read_input_token_count": 5,
        "reasoning_output_token_count": 8,
    }
    assert (reasoning.type, reasoning.text, reasoning.protected_data) == (
        "text_reasoning",
        "reasoning text",
        "protected",
    )


def test_an_agent_tool_run_is_plain_meai_json() -> None:
    """What the agent stores for the article's first prompt reads like the article's C# JSON."""
    run = [
        Message("user", ["現在時刻を教えてください"]),
        Message(
            "assistant", [Content.from_function_call("call_1", "GetDateTime", arguments={})], author_name="SampleAgent"
        ),
        Message("tool", [Content.from_function_result("call_1", result="2026-04-16 01:30:52")]),
        Message("assistant", ["現在の日時は **2026-04-16 01:30:52** です。"], author_name="SampleAgent"),
    ]
    assert messages_to_meai(run) == [
        {"role": "user", "contents": [{"$type": "text", "text": "現在時刻を教えてください"}]},
        {
            "authorName": "SampleAgent",
            "role": "assistant",
            "contents": [{"$type": "functionCall", "name": "GetDateTime", "arguments": {}, "callId": "call_1"}],
        },
        {
            "role": "tool",
            "contents": [{"$type": "functionResult", "result": "2026-04-16 01:30:52", "callId": "call_1"}],
        },
        {
            "authorName": "SampleAgent",
            "role": "assistant",
            "contents": [{"$type": "text", "text": "現在の日時は **2026-04-16 01:30:52** です。"}],
        },
    ]


def test_maf_only_fields_travel_in_additional_properties() -> None:
    call = Content.from_function_call("c1", "GetDateTime", arguments='{"a": 1}')
    item = content_to_meai(call)
    assert item["arguments"] == {"a": 1}
    assert item["additionalProperties"][MAF_EXTRA_KEY] == {"arguments": '{"a": 1}'}
    assert content_from_meai(item).arguments == '{"a": 1}'


def test_non_json_additional_properties_are_refused_clearly() -> None:
    with pytest.raises(ChatHistoryCodecError, match="JSON"):
        message_to_meai(Message("user", ["hi"], additional_properties={"when": object()}))


def test_malformed_json_is_refused_clearly() -> None:
    with pytest.raises(ChatHistoryCodecError):
        message_from_meai(["not", "a", "message"])  # type: ignore[arg-type]
    with pytest.raises(ChatHistoryCodecError):
        message_from_meai({"role": "user", "contents": "text"})
