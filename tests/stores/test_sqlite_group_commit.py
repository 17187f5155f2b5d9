"""SQLite's group commit: concurrent writes share a transaction, yet each one stands or falls alone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from chatlab.stores import open_store
from chatlab.stores.base import Idempotency, IdempotencyKeyReused, VersionMismatch
from chatlab.stores.sqlite import SqliteChatHistoryStore
from chatlab.stores.sqlite.writes import EXPIRY_INTERVAL


def _message(i: int) -> bytes:
    return b'{"role":"user","contents":[{"$type":"text","text":"m%d"}]}' % i


def test_refused_writes_in_a_group_roll_back_alone(tmp_path: Path) -> None:
    counts: list[tuple[int, int]] = []

    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db")
        try:
            first = await store.append("k", [_message(0)], idempotency=Idempotency("once", "a"))
            writes = []
            for i in range(1, 41):
                if i % 4 == 0:  # a stale If-Match: refused, whatever else shares its transaction
                    writes.append(store.append("k", [_message(i)], if_match=["stale.1"]))
                elif i % 4 == 1:  # the same idempotency key with another request: refused
                    writes.append(store.append("k", [_message(i)], idempotency=Idempotency("once", "b")))
                else:
                    writes.append(store.append("k", [_message(i), _message(i)]))
            results = await asyncio.gather(*writes, return_exceptions=True)
            refused = [r for r in results if isinstance(r, VersionMismatch | IdempotencyKeyReused)]
            assert len(refused) == 20 and all(not isinstance(r, BaseException) for r in results if r not in refused)
            stored = await store.get("k")
            kept = [i for i in range(1, 41) if i % 4 in (2, 3)]
            assert sorted(stored[1:]) == sorted(m for i in kept for m in (_message(i), _message(i)))
            assert stored[0] == _message(0) and first.version.endswith(".1")
            for i in kept:  # each batch contiguous
                at = stored.index(_message(i))
                assert stored[at + 1] == _message(i)
        finally:
            counts.append((store.writer.groups, store.writer.writes))
            await store.close()

    asyncio.run(scenario())
    [(groups, writes)] = counts
    assert writes == 41 and groups < writes  # some writes shared a transaction (one fsync)


def test_a_failing_commit_fails_its_whole_group_and_the_next_write_works(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = open_store(f"sqlite:///{tmp_path / 'h.db'}")
        try:
            await store.append("k", [_message(0)])

            def broken(conn: sqlite3.Connection) -> None:
                conn.execute("INSERT INTO no_such_table VALUES (1)")

            with pytest.raises(Exception, match="no_such_table"):
                await store.writer.submit(broken)
            await store.append("k", [_message(1)])
            assert await store.get("k") == [_message(0), _message(1)]
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_batch_longer_than_one_insert_keeps_its_order_and_expired_records_are_deleted(tmp_path: Path) -> None:
    """A long batch keeps its order; expired idempotency records are deleted by a later
    append (at most once per EXPIRY_INTERVAL), not only ignored."""
    path = tmp_path / "h.db"
    batch = [_message(i) for i in range(131)]

    async def scenario() -> None:
        store = open_store(f"sqlite:///{path}")
        try:
            await store.append("k", [_message(-1)], idempotency=Idempotency("old", "a", ttl=0.001))
            await asyncio.sleep(EXPIRY_INTERVAL + 0.1)
            result = await store.append("k", batch, idempotency=Idempotency("new", "b"))
            assert result.version.endswith(f".{len(batch) + 1}")
            assert await store.get("k") == [_message(-1), *batch]
            slice_ = await store.read_slice("k", 65, 2)
            assert slice_.messages == batch[64:66]
        finally:
            await store.close()
        with sqlite3.connect(path) as conn:
            keys = [row[0] for row in conn.execute("SELECT idempotency_key FROM chatlab_idempotency")]
        assert keys == ["new"]

    asyncio.run(scenario())


@pytest.mark.parametrize("deadline", [True, False])
def test_a_group_waits_for_another_connection_s_write_lock(tmp_path: Path, deadline: bool) -> None:
    """The writer tries the lock without waiting, then waits until the group's deadline (or, for writes without
    one, the connection's busy timeout): a lock let go meanwhile is taken, not answered as busy."""
    path = tmp_path / "h.db"

    async def scenario() -> None:
        store = open_store(f"sqlite:///{path}")
        try:
            await store.append("k", [_message(0)])
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            loop = asyncio.get_running_loop()
            loop.call_later(0.3, holder.execute, "ROLLBACK")
            if deadline:
                result = await store.append("k", [_message(1)])
                assert result.version.endswith(".2")
            else:

                def work(conn: sqlite3.Connection) -> None:
                    conn.execute("INSERT INTO chatlab_messages VALUES ('k', 1, ?)", (_message(1),))
                    conn.execute("UPDATE chatlab_conversations SET message_count = 2")

                await store.writer.submit(work)
            assert (await store.read("k")).messages == [_message(0), _message(1)]
            holder.close()
            await store.append("k", [_message(2)])  # and the lock is free again without a wait
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_write_that_would_join_a_group_past_its_deadline_fails_and_writes_nothing(tmp_path: Path) -> None:
    from chatlab.stores import StoreError

    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db", busy_timeout=0.2)
        try:
            await store.append("k", [_message(0)])
            release = threading.Event()
            held = asyncio.ensure_future(store.writer.submit(lambda conn: release.wait(10)))
            await asyncio.sleep(0.05)  # the writer thread is inside the blocking write
            late = asyncio.ensure_future(store.append("k", [_message(1)]))
            await asyncio.sleep(0.3)  # past the append's deadline, still queued
            release.set()
            await held
            with pytest.raises(StoreError, match="waited past the store timeout"):
                await late
            assert await store.get("k") == [_message(0)]
        finally:
            await store.close()

    asyncio.run(scenario())
