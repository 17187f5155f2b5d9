"""Replayed transcripts: a run whose input starts with messages the conversation already holds.

Some callers send the whole transcript again each turn (a chat UI keeping its own copy); appending what is given would
store the history twice and show the model every replayed message twice. :func:`replayed_count` finds how many leading
input messages are the end of the stored history. Two messages are the same when their ``message_id`` s are equal, or,
when either has none, when their wire JSON is, less the attribution MAF adds to loaded messages.
"""

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
    """How many leading messages of ``batch`` are the last ones of ``history`` (the longest overlap; 0: none),
    looking at only the last ``len(batch)`` stored messages."""
    if not history or not batch:
        return 0
    start = max(0, len(history) - len(batch))
    for first in range(start, len(history)):  # the earliest start is the longest overlap
        overlap = len(history) - first
        if all(same_message(history[first + i], batch[i]) for i in range(overlap)):
            return overlap
    return 0
