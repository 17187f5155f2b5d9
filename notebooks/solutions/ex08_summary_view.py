"""Notebook 8, "On your own": the summary view of a conversation, built from every message the plain GET answers."""

from typing import Any

from chatlab.vocabulary import SUMMARY_THROUGH


def summary_view(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest checkpoint, then the messages after its N (the checkpoint not twice); all messages without one.

    A checkpoint counts only when its N is below its own position (1-based): it summarizes messages before it.
    """
    for index in range(len(messages) - 1, -1, -1):  # the latest checkpoint first
        through = (messages[index].get("additionalProperties") or {}).get(SUMMARY_THROUGH)
        if isinstance(through, int) and not isinstance(through, bool) and 0 <= through <= index:
            return [messages[index], *messages[through:index], *messages[index + 1 :]]
    return list(messages)
