"""Summary checkpoints: ``GET /chat-history/{key}?view=summary`` answers the latest one and what follows it.

A checkpoint is an ordinary stored message whose ``additionalProperties`` carry ``"chatlab.summaryThrough": N``: it
summarizes the conversation's messages 1..N (docs/conversations.md). Nothing is rewritten or dropped: the plain
``GET`` still answers the whole transcript, so the article's C# client and every other reader are unaffected. The
summary view is what a model needs instead of the whole transcript: the latest checkpoint, then every message after
its N (those appended while the summary was being written included), the checkpoint itself not twice.

The view works on the stored bytes: only messages that mention the property's name are decoded.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..vocabulary import SUMMARY_THROUGH

__all__ = ["summarized_through", "summary_view"]

_MARK = SUMMARY_THROUGH.encode()


def summarized_through(message: bytes) -> int | None:
    """The N of a checkpoint message (its ``chatlab.summaryThrough``), ``None`` for any other message."""
    if _MARK not in message:
        return None
    try:
        item = msgspec.json.decode(message)
    except msgspec.DecodeError:
        return None
    extra = item.get("additionalProperties") if isinstance(item, dict) else None
    through = extra.get(SUMMARY_THROUGH) if isinstance(extra, dict) else None
    if isinstance(through, int) and not isinstance(through, bool) and through >= 0:
        return through
    return None


def summary_view(messages: Sequence[bytes]) -> list[bytes]:
    """The latest checkpoint followed by the messages after its N; the whole conversation when it has none.

    A checkpoint counts only when it summarizes messages that come before it (N below its own position); any
    other is an ordinary message.
    """
    for position in range(len(messages) - 1, -1, -1):
        through = summarized_through(messages[position])
        if through is not None and through <= position:
            return [messages[position], *messages[through:position], *messages[position + 1 :]]
    return list(messages)
