"""History windowing: the model gets only the end of a long conversation, never half a tool call (which contents
link: :data:`chatlab.vocabulary.CONTENT_KINDS`); scanning backwards costs the window's size, not the conversation's."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from agent_framework import Message

from ..vocabulary import link_of

__all__ = ["estimate_tokens", "window_messages"]


def estimate_tokens(message: Message) -> int:
    """A rough token count (about 4 characters a token, plus a few per message), no tokenizer needed."""
    chars = 0
    for content in message.contents:
        if isinstance(text := getattr(content, "text", None), str):
            chars += len(text)
            continue
        for name in ("name", "arguments", "result", "uri", "message"):
            value = getattr(content, name, None)
            if value is None:
                continue
            chars += len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False, default=str))
    return 4 + (chars + 3) // 4


def window_messages(
    messages: Sequence[Message],
    *,
    max_messages: int | None = None,
    max_tokens: int | None = None,
    count_tokens: Callable[[Message], int] = estimate_tokens,
) -> Sequence[Message]:
    """The longest suffix of ``messages`` within the budgets that separates no call from its results (maybe empty);
    ``messages`` itself when both budgets are ``None``."""
    for name, limit in (("max_messages", max_messages), ("max_tokens", max_tokens)):
        if limit is not None and limit < 0:
            raise ValueError(f"{name} must be 0 or more")
    if max_messages is None and max_tokens is None:
        return messages
    n = len(messages)
    lowest = 0 if max_messages is None else max(0, n - max_messages)
    best = n  # the empty suffix is always safe
    tokens = 0
    pending: set[str] = set()  # results in the suffix whose call is not (yet) in it
    for i in range(n - 1, lowest - 1, -1):
        message = messages[i]
        if max_tokens is not None:
            tokens += count_tokens(message)
            if tokens > max_tokens:
                break
        calls: set[str] = set()
        for content in message.contents:  # the key linking a call and its results: "call_id:<id>"
            link = link_of(content.type)
            if link is None:
                continue
            role, attribute = link
            value = getattr(content, attribute, None)
            if value:
                (pending if role == "result" else calls).add(f"{attribute}:{value}")
        pending -= calls  # a call answered in its own message too
        if not pending:
            best = i
    return list(messages[best:])
