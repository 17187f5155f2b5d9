"""Upgrading a Redis store written by an older chatlab, in place, on its first use.

Layouts 1 to 3 kept every conversation's keys under the prefix with no hash tag (``{prefix}conversations``,
``{prefix}updated``, ``{prefix}messages:{key}``, ``{prefix}version:{key}``, ``{prefix}times:{key}``,
``{prefix}idempotency:{len(key)}:{key}:{idempotency key}``); layout 1 had no versions, layouts 1 and 2 no times.
The upgrade gives conversations times (the upgrade's time) where they have none, then renames each
conversation's keys into its bucket (:mod:`chatlab.stores.redis.keys`; a rename keeps a key's expiry), and the
idempotency records too, and records layout 4 last. Each step is idempotent, so processes that start together
may all run it; older chatlab processes still running on the store must be stopped first (they refuse the new
layout once it is recorded, but would write the old one until they restart). Older layouts only ever ran on a
single server, where a script may touch keys of any slot.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from .connections import Calls, Script
from .keys import Layout
from .scripts import UPGRADE_MOVE, UPGRADE_TIMES

_TIMES, _MOVE = Script(UPGRADE_TIMES), Script(UPGRADE_MOVE)

#: Conversations one upgrade step handles: each step is one short script, so Redis keeps serving meanwhile.
STEP = 500


async def upgrade(calls: Calls, layout: Layout, version: int, now: float) -> None:
    """Bring a store of layout ``version`` (1, 2 or 3) to layout 4 (the caller records it)."""
    prefix = layout.prefix
    index, updated = f"{prefix}conversations".encode(), f"{prefix}updated".encode()
    if version < 3:
        offset, stamp = 0, repr(now)
        while count := int(
            await calls.script(_TIMES, [index, updated], [stamp, f"{prefix}times:".encode(), offset, STEP])
        ):
            offset += count
    while members := await calls.client.zrange(index, 0, STEP - 1):
        await asyncio.gather(*(_move(calls, layout, index, updated, member) for member in members))
    await _move_records(calls.client, layout)


async def _move(calls: Calls, layout: Layout, index: bytes, updated: bytes, member: bytes) -> None:
    prefix, key = layout.prefix.encode(), member.decode("utf-8")
    new = layout.conversation(key)
    old = [prefix + kind + member for kind in (b"messages:", b"version:", b"times:")]
    keys = [index, updated, *old, new.index, new.updated, new.messages, new.version, new.times]
    await calls.script(_MOVE, keys, [member])


async def _move_records(client: Any, layout: Layout) -> None:
    """Rename every idempotency record into its conversation's bucket (one that expires meanwhile is skipped)."""
    start = f"{layout.prefix}idempotency:".encode()
    pattern = re.sub(rb"([*?\[\]\\])", rb"\\\1", start) + b"*"
    renames: list[tuple[bytes, bytes]] = []
    async for name in client.scan_iter(match=pattern, count=STEP):
        length, _, rest = name[len(start) :].decode("utf-8").partition(":")
        if length.isdigit():
            conversation_key, idempotency_key = rest[: int(length)], rest[int(length) + 1 :]
            renames.append((name, layout.idempotency(conversation_key, idempotency_key)))
    for first in range(0, len(renames), STEP):
        pipe = client.pipeline(transaction=False)
        for old, new in renames[first : first + STEP]:
            pipe.rename(old, new)
        await pipe.execute(raise_on_error=False)
