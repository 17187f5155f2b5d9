"""Replayed transcripts: a run whose input starts with messages the conversation already holds (a chat UI sending
its whole copy again each turn), which appended as given would be stored, and shown to the model, twice."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from agent_framework import Message

from .codec import message_to_meai

__all__ = ["replayed_count", "same_message"]


ATTRIBUTION = "_attribution"  # what MAF adds to the messages a provider loads: not part of the message


def _wire(message: Message) -> bytes:
    item = message_to_meai(message)
    extra = item.get("additionalProperties")
    if isinstance(extra, dict) and ATTRIBUTION in extra:
        item["additionalProperties"] = {k: v for k, v in extra.items() if k != ATTRIBUTION}
        if not item["additionalProperties"]:
            del item["additionalProperties"]
    return msgspec.json.encode(item)


def same_message(a: Message, b: Message) -> bool:
    """The same message: equal ids when both have one, else the same bytes on the wire."""
    if a.message_id is not None and b.message_id is not None:
        return a.message_id == b.message_id
    return a is b or _wire(a) == _wire(b)


def replayed_count(history: Sequence[Message], batch: Sequence[Message]) -> int:
    """How many leading messages of ``batch`` are the last ones of ``history`` (the longest overlap; 0: none)."""
    for first in range(max(0, len(history) - len(batch)), len(history)):  # the earliest start is the longest overlap
        overlap = len(history) - first
        if all(same_message(history[first + i], batch[i]) for i in range(overlap)):
            return overlap
    return 0
