"""SQLite's reader threads: many reads answered in batches, each with its own outcome; a late read does nothing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from chatlab.stores import StoreError
from chatlab.stores.sqlite import SqliteChatHistoryStore


def reader_threads() -> int:
    """The SQLite reader threads alive in this process, counted by their name."""
    return sum(thread.name == "chatlab-sqlite-reader" for thread in threading.enumerate())


def test_concurrent_reads_each_get_their_own_answer_and_errors_stay_theirs(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db", reader_threads=2)
        try:
            for i in range(20):
                await store.append(f"k{i}", [b'{"n":%d}' % i] * (i + 1))

            def broken(conn: sqlite3.Connection) -> None:
                conn.execute("SELECT * FROM no_such_table")

            reads = [store.read_array(f"k{i % 20}") for i in range(200)]
            results = await asyncio.gather(
                *reads, store.readers.submit(broken, time.monotonic() + 10), return_exceptions=True
            )
            for i, whole in enumerate(results[:200]):
                assert not isinstance(whole, BaseException)
                assert (
                    whole.count == i % 20 + 1
                    and whole.array == b"[" + b",".join([b'{"n":%d}' % (i % 20)] * (i % 20 + 1)) + b"]"
                )
            assert isinstance(results[200], StoreError) and "no_such_table" in str(results[200])
            assert (await store.read_array("k3")).count == 4  # the failed read's thread reads on (a fresh connection)
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_read_that_waits_past_its_deadline_fails_without_running(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db", reader_threads=1)
        ran: list[int] = []
        try:
            await store.read("k")  # the thread and its connection exist
            slow = store.readers.submit(lambda conn: time.sleep(0.3), time.monotonic() + 10)
            late = store.readers.submit(lambda conn: ran.append(1), time.monotonic() + 0.1)  # queued behind it
            results = await asyncio.gather(slow, late, return_exceptions=True)
            assert results[0] is None and isinstance(results[1], StoreError) and "busy" in str(results[1])
            assert ran == []
        finally:
            await store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("threads", [1, 3])
def test_close_ends_the_threads_and_a_later_read_starts_them_again(tmp_path: Path, threads: int) -> None:
    async def scenario() -> None:
        before = reader_threads()
        store = SqliteChatHistoryStore(tmp_path / "h.db", reader_threads=threads)
        await store.append("k", [b"{}"])
        await store.read_array("k")
        assert reader_threads() > before
        await store.close()
        assert reader_threads() == before
        assert (await store.read_array("k")).array == b"[{}]"
        await store.close()

    asyncio.run(scenario())


def test_reads_one_after_another_keep_to_one_thread(tmp_path: Path) -> None:
    """A thread wakes only when the running ones cannot take the read: sequential reads never start a second
    (a patience no thread start can exceed on a loaded machine)."""

    async def scenario() -> None:
        before = reader_threads()
        store = SqliteChatHistoryStore(tmp_path / "h.db", reader_threads=6, reader_patience=5.0)
        try:
            await store.append("k", [b"{}"])
            for _ in range(50):
                assert (await store.read_array("k")).count == 1
            assert reader_threads() - before == 1
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_long_read_does_not_hold_back_the_answers_of_reads_before_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db", reader_threads=1)
        try:
            await store.read("k")  # the thread and its connection exist
            short = asyncio.ensure_future(store.readers.submit(lambda conn: "short", time.monotonic() + 10))
            long = asyncio.ensure_future(store.readers.submit(lambda conn: time.sleep(0.5), time.monotonic() + 10))
            done, _ = await asyncio.wait([short, long], return_when=asyncio.FIRST_COMPLETED)
            assert done == {short} and short.result() == "short"  # answered while the long read still runs
            await long
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_read_queued_behind_a_long_one_wakes_another_thread(tmp_path: Path) -> None:
    async def scenario() -> None:
        before = reader_threads()
        store = SqliteChatHistoryStore(tmp_path / "h.db", reader_threads=2)
        try:
            await store.append("k", [b"{}"])
            long = asyncio.ensure_future(store.readers.submit(lambda conn: time.sleep(0.5), time.monotonic() + 10))
            # queued at once, while the long read has only begun: left to its thread, and no read comes after it
            assert (await asyncio.wait_for(store.read_array("k"), 0.4)).count == 1
            assert not long.done()
            await long
            assert reader_threads() - before == 2
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_watch_lost_with_a_closed_loop_is_replaced_on_the_next(tmp_path: Path) -> None:
    store = SqliteChatHistoryStore(tmp_path / "h.db", reader_threads=2)

    async def first() -> None:  # a read left pending when its loop ends: the loop closes with a watch scheduled
        await store.append("k", [b"{}"])
        pending = asyncio.ensure_future(store.readers.submit(lambda conn: time.sleep(0.2), time.monotonic() + 10))
        await asyncio.sleep(0)
        assert not pending.done()

    async def second() -> None:
        long = asyncio.ensure_future(store.readers.submit(lambda conn: time.sleep(0.5), time.monotonic() + 10))
        assert (await asyncio.wait_for(store.read_array("k"), 0.4)).count == 1  # another thread woke for it
        await long
        await store.close()

    asyncio.run(first())
    time.sleep(0.3)  # the first loop's read has ended: the threads are parked
    asyncio.run(second())
