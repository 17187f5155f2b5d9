"""The Redis store's own connection pool: what redis-py's pool did on checkout, it does too."""

from __future__ import annotations

import asyncio

from chatlab.stores.redis import CHATLAB_PARAMETERS, RedisChatHistoryStore, split_url


def test_a_connection_the_server_closed_is_opened_again_before_use(redis_url: str) -> None:
    import redis

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            await store.append("k", [b'{"n":1}'])
            pool = await store._clients.get()
            (idle,) = pool._idle  # one operation at a time: one connection
            client_id = await pool.call("CLIENT", "ID")
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                assert admin.client_kill_filter(_id=client_id) == 1  # as a Redis restart or its idle timeout does
            await asyncio.sleep(0.2)  # the end of the stream arrives
            assert (await store.read("k")).messages == [b'{"n":1}']  # not a StoreError
            assert pool._idle == [idle] and idle.is_connected  # the same connection, connected again
        finally:
            await store.close()

    asyncio.run(main())


def test_too_many_concurrent_operations_fail_as_redis_py_s_pool_did(redis_url: str) -> None:
    from chatlab.stores import StoreError

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0, max_connections=2)
        try:
            await store.append("k", [b'{"n":1}'])
            results = await asyncio.gather(*(store.read("k") for _ in range(3)), return_exceptions=True)
            failed = [r for r in results if isinstance(r, StoreError)]
            assert len(failed) == 1 and "Too many connections" in str(failed[0])
            assert (await store.read("k")).messages == [b'{"n":1}']
        finally:
            await store.close()

    asyncio.run(main())
