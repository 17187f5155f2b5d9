"""What the benchmark sends: the article's turns as MEAI ``ChatMessage`` JSON, and their request bodies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from chatlab.tutorial.samples import sample_messages, sample_turn

__all__ = [
    "APPEND_KEYS",
    "APPEND_MESSAGES",
    "READ_MESSAGES",
    "append_body",
    "body",
    "compact",
    "conversation_key",
    "json_size",
    "namespaced_key",
    "read_answer",
    "sample_messages",
    "sample_turn",
]

READ_MESSAGES = 20
"""Messages in the conversation the read load fetches."""
APPEND_MESSAGES = 4
"""Messages per append: one turn of the article's scenario, what the provider sends after each run."""
APPEND_KEYS = 64
"""The append load spreads over this many conversations, as many sessions would."""


def compact(value: Any) -> bytes:
    """JSON without spaces, non-ASCII kept: how the service stores and answers a message."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def body(messages: Sequence[dict[str, Any]]) -> bytes:
    """The ``{"messages": [...]}`` request body of an append or a replace."""
    return compact({"messages": list(messages)})


def append_body() -> bytes:
    """The body the append load sends: one turn of 4 messages."""
    return body(sample_messages(APPEND_MESSAGES, start=1000))


def read_answer() -> bytes:
    """The answer to the read load: the conversation's 20 messages as one JSON array."""
    return b"[" + b",".join(compact(m) for m in sample_messages(READ_MESSAGES)) + b"]"


def json_size(bodies: Sequence[bytes]) -> int:
    """The messages' own compact JSON bytes (what the service stores), over all the bodies."""
    return sum(len(compact(m)) for b in bodies for m in json.loads(b)["messages"])


def conversation_key(i: int) -> str:
    """The ``i``-th conversation's key in the listing's stores: key order is ``i``'s order."""
    return f"user-{i:07d}"


def namespaced_key(n: int, plain: int) -> str:
    """The ``n``-th namespaced conversation beside ``plain`` conversations: right after the plain key ``n % plain``
    (its namespace is that key), so the namespaced ones lie between every two plain ones, where a keyless page must
    not read them."""
    return f"{conversation_key(n % plain)}/c{n // plain:07d}"
