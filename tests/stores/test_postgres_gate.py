"""The PostgreSQL store's gate: operations beyond ``max_size`` wait in line for a connection (not in the pool's
own queue), each within its deadline, and every way out of an operation gives its place back."""

from __future__ import annotations

import asyncio

import pytest

from chatlab.stores import StoreError


def _store(postgres_url: str, **options: float) -> object:
    from chatlab.stores.postgres import PostgresChatHistoryStore

    return PostgresChatHistoryStore(postgres_url, **options)  # type: ignore[arg-type]


async def _held_at_once(store, tasks: int, seconds: float) -> int:
    """The most operations that held a connection at the same time, of ``tasks`` concurrent ones."""
    holding = most = 0

    async def one() -> None:
        nonlocal holding, most
        async with store._connection() as conn:
            holding += 1
            most = max(most, holding)
            await conn.execute("SELECT pg_sleep(%s)", (seconds,))
            holding -= 1

    await asyncio.gather(*(one() for _ in range(tasks)))
    return most


def test_operations_beyond_max_size_wait_at_the_gate_not_in_the_pool(postgres_url: str) -> None:
    async def main() -> None:
        store = _store(postgres_url, max_size=2, timeout=5.0)
        try:
            await _held_at_once(store, 2, 0.05)  # the pool has grown to its two connections
            pool = await store._pools.get()
            pool.pop_stats()
            assert await _held_at_once(store, 8, 0.05) == 2
            stats = pool.get_stats()
            assert stats.get("requests_waiting", 0) == 0 and stats.get("requests_queued", 0) == 0
        finally:
            await store.close()

    asyncio.run(main())


def test_a_wait_at_the_gate_past_the_timeout_is_the_store_error_of_no_connection(postgres_url: str) -> None:
    async def main() -> None:
        store = _store(postgres_url, max_size=1, timeout=5.0)
        try:
            await store.read("k")  # the pool is open, its connection made

            async def hold() -> None:
                async with store._connection():  # within its deadline of 5 s
                    await asyncio.sleep(0.8)

            holder = asyncio.create_task(hold())
            await asyncio.sleep(0.05)
            store.timeout = 0.5  # the next operations' deadline
            started = asyncio.get_running_loop().time()
            with pytest.raises(StoreError, match=r"is unreachable: no connection within 0\.5 s"):
                await store.read("k")
            assert asyncio.get_running_loop().time() - started < 2.0  # its own deadline (0.5 s), not the pool's 5 s
            await holder
            assert (await store.read("k")).messages == []  # both places given back
        finally:
            await store.close()

    asyncio.run(main())


def test_failures_and_cancellations_give_their_place_back(postgres_url: str) -> None:
    async def main() -> None:
        store = _store(postgres_url, max_size=2, timeout=5.0)
        try:
            for _ in range(3):  # a failed statement, more times than there are places
                with pytest.raises(StoreError):
                    async with store._connection() as conn:
                        await conn.execute("SELECT * FROM no_such_table")
            holders = [asyncio.create_task(_held_at_once(store, 1, 0.3)) for _ in range(2)]
            await asyncio.sleep(0.1)
            waiting = asyncio.create_task(store.read("k"))  # in line behind the two holders
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await asyncio.gather(*holders)
            assert await _held_at_once(store, 6, 0.05) == 2  # two places, no more, no fewer
        finally:
            await store.close()

    asyncio.run(main())
