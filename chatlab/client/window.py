"""History windowing: hand the model only the end of a long conversation, never half a tool call.

The service keeps every message; the provider may pass the model only the longest suffix within a message or token
budget that cuts no tool call from its results (which contents link, :data:`chatlab.vocabulary.CONTENT_KINDS`). The
window may be smaller than the budget allows, even empty; never larger. The scan runs backwards from the newest
message, so it costs the window's size, not the conversation's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_framework import Message

from ..vocabulary import link_of

__all__ = ["HistoryWindow", "estimate_tokens", "window_messages"]


def _link(content: Any) -> tuple[str | None, bool]:
    """The key linking a content to its partner, and whether it is the answering half."""
    link = link_of(content.type)
    if link is None:
        return None, False
    role, attribute = link
    key = getattr(content, attribute, None)
    return (f"{attribute}:{key}" if key else None), role == "result"


def estimate_tokens(message: Message) -> int:
    """A rough token count (about 4 characters a token, plus a few per message), no tokenizer needed."""
    chars = 0
    for content in message.contents:
        text = getattr(content, "text", None)
        if isinstance(text, str):
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
) -> list[Message]:
    """The longest suffix of ``messages`` within the budgets (``None``: no limit) that separates no call from its
    results."""
    if max_messages is not None and max_messages < 0:
        raise ValueError("max_messages must be 0 or more")
    if max_tokens is not None and max_tokens < 0:
        raise ValueError("max_tokens must be 0 or more")
    n = len(messages)
    if max_messages is None and max_tokens is None:
        return list(messages)
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
        calls = []
        for content in message.contents:
            key, is_result = _link(content)
            if key is None:
                continue
            if is_result:
                pending.add(key)
            else:
                calls.append(key)
        pending.difference_update(calls)  # a call answers results of its own message too
        if not pending:
            best = i
    return list(messages[best:])


@dataclass(frozen=True)
class HistoryWindow:
    """The provider's window: at most ``max_history_messages`` / ``max_history_tokens`` (``None``: no limit)."""

    max_history_messages: int | None = None
    max_history_tokens: int | None = None
    count_tokens: Callable[[Message], int] = estimate_tokens

    def __post_init__(self) -> None:
        for name, limit in (
            ("max_history_messages", self.max_history_messages),
            ("max_history_tokens", self.max_history_tokens),
        ):
            if limit is not None and (not isinstance(limit, int) or limit < 1):
                raise ValueError(f"{name} must be a whole number of at least 1, or None for no limit")

    def __call__(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The window onto ``messages``; ``messages`` itself (not a copy) when there is no limit."""
        if self.max_history_messages is None and self.max_history_tokens is None:
            return messages
        return window_messages(
            messages,
            max_messages=self.max_history_messages,
            max_tokens=self.max_history_tokens,
            count_tokens=self.count_tokens,
        )
