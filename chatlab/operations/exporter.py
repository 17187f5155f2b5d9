"""``chatlab export``: every conversation (or the keys asked for) as JSON Lines, each message as stored."""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO

from .lines import encode_line
from .places import Place


async def export_conversations(place: Place, out: BinaryIO, keys: Iterable[str] | None = None) -> int:
    """Write the conversations of ``place`` to ``out``, ordered by key; how many were written.

    With ``keys``, only those (a key that names no conversation is left out: an export holds
    what exists). Each line is one read of one conversation, a consistent snapshot of it.
    """
    wanted = sorted(set(keys)) if keys is not None else await place.keys()
    written = 0
    for key in wanted:
        messages, version = await place.read(key)
        if version == "0":  # absent: nothing to export
            continue
        out.write(encode_line(key, messages))
        written += 1
    out.flush()
    return written
