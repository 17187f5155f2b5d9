"""The quick check of a body's messages never passes what the schema's models refuse."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from chatlab.service import precheck, schema

_KEYS = [
    "role",
    "contents",
    "authorName",
    "createdAt",
    "messageId",
    "additionalProperties",
    "annotations",
    "$type",
    "text",
    "uri",
    "callId",
    "name",
    "arguments",
    "result",
    "informationalOnly",
    "details",
    "mediaType",
    "protectedData",
    "message",
    "errorCode",
    schema._TAG_FIELD,
    "other",
]
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(["", "user", "2024-06-01T12:00:00+00:00", "2024-13-01", *schema.CONTENT_TYPES[:10]]),
    st.builds(lambda n: msgspec.Raw(str(n).encode()), st.integers()),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6)),
    max_leaves=25,
)


def _accepted(messages: Any) -> bool:
    try:
        schema._messages_adapter.validate_python(messages)
    except ValidationError:
        return False
    return True


_VALUE = st.one_of(st.sampled_from(["x", "2024-06-01T12:00:00+00:00"]), st.just({}), _JSON)
_CONTENT = st.fixed_dictionaries(
    {"$type": st.sampled_from(schema.CONTENT_TYPES)},
    optional={key: _VALUE for key in _KEYS if key != "$type"},
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.one_of(st.just("user"), _SCALARS), "contents": st.lists(_CONTENT, max_size=3)},
    optional={key: _VALUE for key in _KEYS if key not in ("role", "contents")},
)
MESSAGES = st.lists(st.one_of(_MESSAGE, _JSON), max_size=3)


@settings(max_examples=3000, deadline=None)
@given(MESSAGES)
def test_what_the_quick_check_passes_the_models_accept(messages: list[Any]) -> None:
    if precheck.valid("messages", messages, schema._PRECHECKED):
        assert _accepted(messages)


def _contents_accepted(contents: Any) -> bool:
    try:
        schema._ADAPTERS["contents"].validate_python(contents)
    except ValidationError:
        return False
    return True


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.one_of(_CONTENT, _JSON), max_size=4))
def test_what_the_quick_check_passes_in_a_piece_of_contents_the_models_accept(contents: list[Any]) -> None:
    if precheck.valid("contents", contents, schema._PRECHECKED):
        assert _contents_accepted(contents)


def test_a_piece_of_plain_contents_passes_and_a_wrong_one_does_not() -> None:
    plain = [{"$type": "text", "text": "a"}, {"$type": "functionCall", "callId": "c", "name": "n", "arguments": {}}]
    assert precheck.valid("contents", plain, schema._PRECHECKED) and _contents_accepted(plain)
    wrong = [{"$type": "functionCall", "name": "n"}]  # no callId
    assert not precheck.valid("contents", wrong, schema._PRECHECKED) and not _contents_accepted(wrong)


@given(st.sampled_from(schema.CONTENT_TYPES), st.sampled_from(schema.CONTENT_TYPES))
def test_the_tag_fields_name_is_left_to_the_models(tag: str, named: str) -> None:
    messages = [
        {"role": "user", "contents": [{"$type": tag, schema._TAG_FIELD: named, "uri": "u", "callId": "c", "name": "n"}]}
    ]
    assert not precheck.valid("messages", messages, schema._PRECHECKED)


def test_the_providers_turn_passes() -> None:
    from benchmarks import workload
    from chatlab.service import jsontext

    messages = jsontext.parse(workload.append_body())["messages"]
    assert precheck.valid("messages", messages, schema._PRECHECKED) and _accepted(messages)
