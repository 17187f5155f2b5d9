"""A compact body taken as sent stores exactly what the full, number-keeping parse stores, or is left to it."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from benchmarks.workload import append_body
from chatlab.service import jsontext, schema
from chatlab.vocabulary import Refused

_KEYS = ["role", "contents", "authorName", "createdAt", "messageId", "additionalProperties", "text", "callId",
         "name", "arguments", "result", "informationalOnly", "$type", "other"]  # fmt: skip
#: JSON texts the full parse keeps and msgspec would write otherwise, and some it refuses.
_SCALARS = st.sampled_from(
    [
        "null",
        "true",
        "false",
        "0",
        "-0",
        "7",
        "1.5",
        "1.10",
        "1E2",
        "2.5e-400",
        "1e400",
        "12345678901234567890123",
        "9" * 400,
        '"x"',
        '"user"',
        '"\\u00e9"',
        '"é"',
        '"\\ud800"',
        '"a\\nb"',
        '"\\u001f"',
        '"\\/"',
        '"a\\"b"',
        '"2024-06-01T12:00:00+00:00"',
        '"2024-13-01"',
        "NaN",
        '"\u2028"',
    ]
)
_SEP = st.sampled_from([",", ",", ",", ", "])
_COLON = st.sampled_from([":", ":", ":", " : "])


def _object(pairs: st.SearchStrategy[list[tuple[str, str]]]) -> st.SearchStrategy[str]:
    return st.builds(
        lambda items, sep, colon: "{" + sep.join(f'"{k}"{colon}{v}' for k, v in items) + "}", pairs, _SEP, _COLON
    )


_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.builds(lambda items, sep: "[" + sep.join(items) + "]", st.lists(inner, max_size=3), _SEP),
        _object(st.lists(st.tuples(st.sampled_from(_KEYS), inner), max_size=4)),
    ),
    max_leaves=12,
)
_CONTENT = _object(
    st.builds(
        lambda kind, rest: [("$type", f'"{kind}"'), *rest],
        st.sampled_from([*schema.CONTENT_TYPES[:6], "nope"]),
        st.lists(st.tuples(st.sampled_from(_KEYS), st.one_of(_SCALARS, _JSON)), max_size=3),
    )
)
_MESSAGE = _object(
    st.builds(
        lambda role, contents, rest, first: ([] if first else rest) + [("role", role), ("contents", contents)] + rest,
        st.sampled_from(['"user"', '"assistant"', '""', "7"]),
        st.builds(lambda items: "[" + ",".join(items) + "]", st.lists(_CONTENT, max_size=3)),
        st.lists(st.tuples(st.sampled_from(_KEYS), _JSON), max_size=3),
        st.booleans(),
    )
)
#: Messages the fast path takes: valid, compact, numbers and strings as msgspec writes them.
_PLAIN = st.sampled_from(["null", "true", "7", "-3", "1.5", '"x"', '"é"', '"a\\nb"', '"\\u001f"', '"\u2028"'])
_PLAIN_MESSAGE = st.builds(
    lambda texts, extra: (
        '{"role":"user","contents":['
        + ",".join(f'{{"$type":"text","text":{t}}}' for t in texts)
        + "]"
        + "".join(f',"{k}":{v}' for k, v in extra)
        + "}"
    ),
    st.lists(st.sampled_from(['"x"', '"é"', "null", '"a\\"b"']), max_size=2),
    st.lists(st.tuples(st.sampled_from(["other", "messageId", "additionalProperties"]), _PLAIN), max_size=2),
)
BODIES = st.builds(
    lambda items: '{"messages":[' + ",".join(items) + "]}",
    st.one_of(st.lists(_PLAIN_MESSAGE, max_size=3), st.lists(st.one_of(_MESSAGE, _PLAIN_MESSAGE), max_size=3)),
)


def _full_parse(body: bytes) -> Any:
    try:
        return schema._decode(jsontext.parse(body), 10_000, 1_000_000, False)
    except (Refused, jsontext.InvalidJson) as refusal:
        return refusal


@settings(max_examples=500, deadline=None)
@given(BODIES)
def test_what_is_taken_as_sent_is_what_the_full_parse_stores(text: str) -> None:
    body = text.encode()
    taken = schema._already_stored_form(body, 10_000, 1_000_000)
    event("taken as sent" if taken is not None else "left to the full parse")
    if taken is not None:
        assert _full_parse(body) == taken


def test_the_providers_body_is_taken_as_sent() -> None:
    body = append_body()
    taken = schema._already_stored_form(body, 10_000, None)
    assert taken is not None and len(taken) == 4
    assert schema.decode_messages_body(body, max_messages=10_000) == taken


def test_numbers_and_escapes_msgspec_would_rewrite_go_to_the_full_parse() -> None:
    for value, stored in (("1.10", b"1.10"), ("1E2", b"1E2"), ("-0", b"-0"), ('"\\u00e9"', '"é"'.encode())):
        body = f'{{"messages":[{{"role":"user","contents":[],"x":{value}}}]}}'.encode()
        assert schema._already_stored_form(body, 10_000, None) is None
        assert schema.decode_messages_body(body, max_messages=10_000) == [
            b'{"role":"user","contents":[],"x":' + stored + b"}"
        ]


def test_limits_and_refusals_are_the_full_parses() -> None:
    body = b'{"messages":[{"role":"user","contents":[]},{"role":"user","contents":[]}]}'
    assert schema._already_stored_form(body, 1, None) is None  # 413 comes from the full parse
    assert schema._already_stored_form(body, 10, 10) is None
    repeated = b'{"messages":[{"role":"user","role":"user","contents":[]}]}'
    assert schema._already_stored_form(repeated, 10, None) is None
    assert isinstance(_full_parse(repeated), (Refused, jsontext.InvalidJson))


def test_a_repeated_messages_key_goes_to_the_full_parse() -> None:
    """The body is decoded whole: with ``"messages"`` twice, what it holds last may be anything (not a list)."""
    message = b'{"role":"user","contents":[]}'
    for tail in (b'5,"z":[]', b'{"k":1},"z":[]', b"[]", b"[" + message + b"," + message + b"]"):
        body = b'{"messages":[' + message + b'],"messages":' + tail + b"}"
        assert schema._already_stored_form(body, 10, None) is None
        assert isinstance(_full_parse(body), jsontext.InvalidJson)  # refused: a key sent twice
