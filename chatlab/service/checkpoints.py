"""Summary checkpoints (``?view=summary``, docs/conversations.md): stored messages with
``additionalProperties["chatlab.summaryThrough"] = N``; only messages whose bytes mention the property are decoded."""

from __future__ import annotations

from collections.abc import Sequence

from ..vocabulary import SUMMARY_THROUGH
from .jsontext import object_mentioning

_MARK = SUMMARY_THROUGH.encode()


def summarized_through(message: bytes) -> int | None:
    """The N of a checkpoint message (its ``chatlab.summaryThrough``), ``None`` for any other message."""
    item = object_mentioning(message, _MARK)
    extra = item.get("additionalProperties") if item is not None else None
    through = extra.get(SUMMARY_THROUGH) if isinstance(extra, dict) else None
    return through if type(through) is int and through >= 0 else None  # not a bool


def summary_view(messages: Sequence[bytes]) -> list[bytes]:
    """The latest checkpoint followed by the messages after its N; the whole conversation when it has none.
    A checkpoint counts only when it summarizes messages before it (N below its own position)."""
    for position in reversed(range(len(messages))):
        through = summarized_through(messages[position])
        if through is not None and through <= position:
            return [messages[position], *messages[through:position], *messages[position + 1 :]]
    return list(messages)
