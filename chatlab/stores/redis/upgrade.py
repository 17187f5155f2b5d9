"""Upgrading a Redis store in place, on its first use (docs/stores.md): from layouts 1 to 3 (keys with no hash tag:
``{prefix}messages:{key}``, ...; single server only, where a script may touch any key) to layout 4, from layout 4
to 5 (each bucket's index of plain keys, filled from its index of every key), and from layout 5 to 6 (each
conversation's participants, counted from its messages). Each step is idempotent: processes that start together may
all run it."""

from __future__ import annotations

import asyncio
import re

from .connections import Calls
from .keys import Layout
from .scripts import COUNT_PARTICIPANTS, INDEX_PLAIN, READ, UPGRADE_MOVE, authors_args

#: Conversations one upgrade step handles: each step is one short script, so Redis keeps serving meanwhile.
STEP = 500


async def upgrade(calls: Calls, layout: Layout, version: int, now: float) -> None:
    """Bring a store of layout ``version`` (1 to 5) to layout 6 (the caller records it)."""
    if version < 4:
        await _move(calls, layout, version, now)
    if version < 5:
        await asyncio.gather(*(_index_plain(calls, layout, bucket) for bucket in range(layout.buckets)))
    await count_participants(calls, layout)


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


async def count_participants(calls: Calls, layout: Layout) -> None:
    """Layout 5 to 6: give every conversation of every bucket its participants, :data:`STEP` conversations at a
    time, each counted from one snapshot of its messages and written only if it is still at that snapshot's version
    (else counted again: a process already on layout 6 appended meanwhile)."""
    for base in layout.bases:
        low = b"-"
        while keys := await calls.client.zrangebylex(base + b"conversations", low, b"+", start=0, num=STEP):
            await asyncio.gather(*(_count_one(calls, layout, key.decode("utf-8")) for key in keys))
            low = b"(" + keys[-1]


async def _count_one(calls: Calls, layout: Layout, conversation_key: str) -> None:
    """One conversation's participants, counted until no write came between the read and the count's write."""
    keys = layout.conversation(conversation_key)
    member = conversation_key.encode("utf-8")
    written = 0
    while not written:
        version, _, messages = await calls.script(READ, keys, [member, 0, -1])
        written = await calls.script(COUNT_PARTICIPANTS, keys, [member, version, *authors_args(messages)])
