"""The retention sweeper: while the app runs, it has the store delete what is due now and then.

Each store deletes its own way (:meth:`~chatlab.stores.ChatHistoryStore.sweep`; docs/stores.md).
The sweep runs every tenth of the retention, at most every minute and at least every 50 ms,
so nothing outlives its retention by much more than a tenth of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from ..stores import ChatHistoryStore, StoreError

log = logging.getLogger(__name__)


def sweep_interval(retention: float) -> float:
    """Seconds between two sweeps for a retention of ``retention`` seconds."""
    return min(60.0, max(0.05, retention / 10))


async def _sweep_forever(store: ChatHistoryStore, interval: float) -> None:
    while True:
        try:
            deleted = await store.sweep()
            if deleted:
                log.info("retention: deleted %d conversations not written for %s s", deleted, store.retention)
        except StoreError as exc:  # the store is down: try again next time
            log.warning("retention sweep failed: %s", exc)
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def sweeping(store: ChatHistoryStore) -> AsyncIterator[None]:
    """Sweep ``store`` in the background while the block runs (nothing when it has no retention)."""
    if store.retention is None:
        yield
        return
    task = asyncio.create_task(_sweep_forever(store, sweep_interval(store.retention)))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
