"""What the benchmark sends: the article's turns as MEAI ``ChatMessage`` JSON, and their request bodies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

READ_MESSAGES = 20
"""Messages in the conversation the read load fetches."""
APPEND_MESSAGES = 4
"""Messages per append: one turn of the article's scenario, what the provider sends after each run."""
APPEND_KEYS = 64
"""The append load spreads over this many conversations, as many sessions would."""


def sample_turn(i: int) -> list[dict[str, Any]]:
    """One turn of the article's scenario as MEAI ChatMessage JSON: question, tool call, result, answer."""
    stamp = f"2026-04-16T01:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
    return [
        {
            "role": "user",
            "contents": [{"$type": "text", "text": f"現在時刻を教えてください (turn {i})"}],
            "createdAt": stamp,
            "messageId": f"msg-{i}-0",
        },
        {
            "authorName": "SampleAgent",
            "role": "assistant",
            "contents": [{"$type": "functionCall", "callId": f"call_{i}", "name": "GetDateTime", "arguments": {}}],
            "createdAt": stamp,
            "messageId": f"msg-{i}-1",
        },
        {
            "role": "tool",
            "contents": [{"$type": "functionResult", "callId": f"call_{i}", "result": "2026-04-16 01:30:52"}],
            "messageId": f"msg-{i}-2",
        },
        {
            "authorName": "SampleAgent",
            "role": "assistant",
            "contents": [{"$type": "text", "text": "現在の日時は **2026-04-16 01:30:52** です。"}],
            "createdAt": stamp,
            "messageId": f"msg-{i}-3",
        },
    ]


def sample_messages(count: int, start: int = 0) -> list[dict[str, Any]]:
    """``count`` messages of consecutive sample turns from turn ``start`` (the last turn may be cut short)."""
    out: list[dict[str, Any]] = []
    turn = start
    while len(out) < count:
        out.extend(sample_turn(turn))
        turn += 1
    return out[:count]


def body(messages: Sequence[dict[str, Any]]) -> bytes:
    """The ``{"messages": [...]}`` request body of an append or a replace."""
    return json.dumps({"messages": list(messages)}, ensure_ascii=False, separators=(",", ":")).encode()


def append_body() -> bytes:
    """The body the append load sends: one turn of 4 messages."""
    return body(sample_messages(APPEND_MESSAGES, start=1000))


def json_size(bodies: Sequence[bytes]) -> int:
    """The messages' own compact JSON bytes (what the service stores), over all the bodies."""
    from ..service import schema

    return sum(len(m) for b in bodies for m in schema.decode_messages_body(b, max_messages=10_000))
