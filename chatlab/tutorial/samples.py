"""The article's turns as Microsoft.Extensions.AI ``ChatMessage`` JSON (long histories for notebooks, tests and the
benchmark are these turns, numbered)."""

from __future__ import annotations

from typing import Any


def sample_turn(i: int) -> list[dict[str, Any]]:
    """Turn ``i`` of the article's scenario: question, tool call, result, answer."""
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
    """``count`` messages of consecutive turns from turn ``start`` (the last turn may be cut short)."""
    turns = range(start, start + (count + 3) // 4)
    return [message for turn in turns for message in sample_turn(turn)][:count]
