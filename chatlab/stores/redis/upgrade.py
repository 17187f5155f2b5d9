"""Upgrading a Redis store of layout 1 to 3 (keys with no hash tag: ``{prefix}messages:{key}``, ...; single server
only, where a script may touch any key) in place, on its first use (docs/stores.md). Each step is idempotent:
processes that start together may all run it."""

from __future__ import annotations

import asyncio
import re

from .connections import Calls
from .keys import Layout
from .scripts import UPGRADE_MOVE

#: Conversations one upgrade step handles: each step is one short script, so Redis keeps serving meanwhile.
STEP = 500


async def upgrade(calls: Calls, layout: Layout, version: int, now: float) -> None:
    """Bring a store of layout ``version`` (1, 2 or 3) to layout 4 (the caller records it)."""
    prefix = layout.prefix.encode()
    index = prefix + b"conversations"
    updated = prefix + b"updated"
    stamp = repr(now) if version < 3 else ""
    while members := await calls.client.zrange(index, 0, STEP - 1):
        moves = []
        for member in members:
            old = [prefix + kind + member for kind in (b"messages:", b"version:", b"times:")]
            keys = [index, updated, *old, *layout.conversation(member.decode("utf-8"))]
            moves.append(calls.script(UPGRADE_MOVE, keys, [member, stamp]))
        await asyncio.gather(*moves)
    # the idempotency records (one that expires meanwhile is skipped)
    start = prefix + b"idempotency:"
    renames = calls.client.pipeline(transaction=False)
    async for name in calls.client.scan_iter(match=re.sub(rb"([*?\[\]\\])", rb"\\\1", start) + b"*", count=STEP):
        length, _, rest = name[len(start) :].decode("utf-8").partition(":")
        if length.isdigit():
            renames.rename(name, layout.idempotency(rest[: int(length)], rest[int(length) + 1 :]))
    await renames.execute(raise_on_error=False)
