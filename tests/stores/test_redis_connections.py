"""The Redis store's own connections: what redis-py's pool did on checkout it does too, and its replies stay in step."""

from __future__ import annotations

import asyncio

import pytest

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
            (fresh,) = pool._idle  # the closed one was dropped at checkout, a new one opened
            assert fresh is not idle and idle.broken and not idle.connection.is_connected
            assert pool._open == {fresh.connection}
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


def test_an_error_reply_in_a_read_is_raised_and_the_connection_stays_in_step(redis_url: str) -> None:
    import redis

    from chatlab.stores import StoreError

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            await store.append("k", [b'{"n":1}'])
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                admin.set(store._list_key("bad"), "not a list")
            pool = await store._clients.get()
            (idle,) = pool._idle
            for read in (store.read("bad"), store.read_slice("bad", 1, 1)):
                with pytest.raises(StoreError, match="WRONGTYPE"):
                    await read
            assert (await store.read("k")).messages == [b'{"n":1}']  # the replies after the error are k's
            assert pool._idle == [idle]  # every reply of the failed read was read: kept
        finally:
            await store.close()

    asyncio.run(main())


def test_bytes_nobody_asked_for_break_the_connection(redis_url: str) -> None:
    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            await store.append("k", [b'{"n":1}'])
            pool = await store._clients.get()
            (idle,) = pool._idle
            idle.data_received(b"+OK\r\n")  # as a reply arriving after its request was given up
            assert idle.broken
            assert (await store.read("k")).messages == [b'{"n":1}']
            assert idle not in pool._idle and idle.connection not in pool._open
        finally:
            await store.close()

    asyncio.run(main())


def test_reads_tell_absent_unversioned_and_versioned_conversations_apart(redis_url: str) -> None:
    """The read's version comes from plain commands (no script): the states the write scripts leave or find."""
    import redis

    from chatlab.stores.base import ABSENT
    from chatlab.stores.redis import UNVERSIONED

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            written = await store.append("new", [b"1", b"2", b"3"])
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                admin.zadd(store._index_key, {"old": 0})  # layout 1: indexed, messages, no version
                admin.rpush(store._list_key("old"), b"1", b"2")
                admin.rpush(store._list_key("stray"), b"1")  # not in the index: not a conversation
            for key, version, messages in [
                ("new", written.version, [b"1", b"2", b"3"]),
                ("old", UNVERSIONED, [b"1", b"2"]),
                ("stray", ABSENT, [b"1"]),
                ("none", ABSENT, []),
            ]:
                whole = await store.read(key)
                assert (whole.messages, whole.version) == (messages, version), key
                array = await store.read_array(key)
                assert (array.array, array.count, array.version) == (
                    b"[" + b",".join(messages) + b"]",
                    len(messages),
                    version,
                )
                part = await store.read_slice(key, 1, 1)
                assert (part.messages, part.count, part.version) == (messages[1:2], len(messages), version), key
                head = await store.read_slice(key, 0, 0)
                assert (head.messages, head.count, head.version) == ([], len(messages), version), key
                rest = await store.read_slice(key, 1)
                assert (rest.messages, rest.count, rest.version) == (messages[1:], len(messages), version), key
        finally:
            await store.close()

    asyncio.run(main())
