"""Upgrading a Redis store in place, on its first use (docs/stores.md): from layouts 1 to 3 (keys with no hash tag:
``{prefix}messages:{key}``, ...; single server only, where a script may touch any key) to layout 4, and from layout 4
to 5 (each bucket's index of plain keys, filled from its index of every key). Each step is idempotent: processes that
start together may all run it."""

from __future__ import annotations

import asyncio
import re

from .connections import Calls
from .keys import Layout
from .scripts import INDEX_PLAIN, UPGRADE_MOVE

#: Conversations one upgrade step handles: each step is one short script, so Redis keeps serving meanwhile.
STEP = 500


async def upgrade(calls: Calls, layout: Layout, version: int, now: float) -> None:
    """Bring a store of layout ``version`` (1 to 4) to layout 5 (the caller records it)."""
    if version < 4:
        await _move(calls, layout, version, now)
    await asyncio.gather(*(_index_plain(calls, layout, bucket) for bucket in range(layout.buckets)))


async def _index_plain(calls: Calls, layout: Layout, bucket: int) -> None:
    """Fill a bucket's plain index from its index of every key, :data:`STEP` keys per script. A conversation this
    chatlab writes meanwhile is indexed by its write's script; one an older chatlab writes would be missed, so those
    are stopped before the upgrade (docs/stores.md)."""
    keys = [layout.index(bucket), layout.index(bucket, plain=True)]
    start = b"-"
    while True:
        last = await calls.script(INDEX_PLAIN, keys, [start, STEP])
        if last is None:
            return
        start = b"(" + last


async def _move(calls: Calls, layout: Layout, version: int, now: float) -> None:
    """Bring a store of layout ``version`` (1, 2 or 3) to layout 4: its conversations into their buckets."""
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
