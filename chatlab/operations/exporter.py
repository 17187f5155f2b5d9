"""``chatlab export``: every conversation (or the keys asked for) as JSON Lines, each message as stored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import BinaryIO

from ..stores.base import ABSENT
from .lines import encode_line
from .places import PAGE, Place


async def export_conversations(
    place: Place, out: BinaryIO, keys: Iterable[str] | None = None, *, page: int = PAGE
) -> int:
    """Write the conversations of ``place`` to ``out``, ordered by key, with their titles and tags; how many
    were written.

    With ``keys``, only those (a key that names no conversation is left out: an export holds
    what exists). Each line is one read of one conversation, a consistent snapshot of its messages;
    the whole place is listed ``page`` conversations at a time, never all at once.
    """
    written = 0
    if keys is not None:
        for key in sorted(set(keys)):
            messages, version = await place.read(key)
            if version == ABSENT:
                continue
            summary = await place.summary(key)
            title, tags = (summary.title, summary.tags) if summary is not None else (None, {})
            out.write(encode_line(key, messages, title, tags))
            written += 1
    else:
        async for summary in place.summaries(page):
            written += await _export_one(place, out, summary.conversation_key, summary.title, summary.tags)
    out.flush()
    return written


async def _export_one(place: Place, out: BinaryIO, key: str, title: str | None, tags: Mapping[str, str]) -> int:
    messages, version = await place.read(key)
    if version == ABSENT:  # deleted since it was listed: nothing to export
        return 0
    out.write(encode_line(key, messages, title, tags))
    return 1
