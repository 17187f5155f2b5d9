"""``chatlab export``: every conversation (or the keys asked for) as JSON Lines, each message as stored."""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO

from ..stores.base import ABSENT
from ..vocabulary import ConversationSummary
from .lines import encode_line
from .places import PAGE, Place


async def export_conversations(
    place: Place, out: BinaryIO, keys: Iterable[str] | None = None, *, page: int = PAGE
) -> int:
    """Write the conversations of ``place`` (only ``keys``, those that exist) to ``out`` in key order; how many.
    Each line is one read of one conversation, a consistent snapshot of its messages."""
    written = 0
    if keys is None:
        async for summary in place.summaries(page):
            written += await _export_one(place, out, summary.conversation_key, summary)
    else:
        for key in sorted(set(keys)):
            written += await _export_one(place, out, key, None)
    out.flush()
    return written


async def _export_one(place: Place, out: BinaryIO, key: str, summary: ConversationSummary | None) -> int:
    messages, version = await place.read(key)
    if version == ABSENT:  # deleted since it was listed, or a key asked for that names nothing
        return 0
    if summary is None:
        summary = await place.summary(key)
    title, tags = (summary.title, summary.tags) if summary is not None else (None, {})
    out.write(encode_line(key, messages, title, tags))
    return 1
